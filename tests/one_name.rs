//! One name (issue "(3 of 5)", item 2): the program answers as `agent-vault` (the link the
//! packages install beside `vault`), `vault setup` registers the server as `agent-vault`
//! (tests/setup.rs), and `vault doctor` notices when `vault` on PATH is another program, such
//! as HashiCorp Vault's CLI, which has the same name.
mod support;

use std::path::Path;
use support::*;

/// A folder with a `vault` that is not this program: a script that answers as HashiCorp's does.
fn hashicorp_vault(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let folder = dir.join("hashicorp");
    std::fs::create_dir_all(&folder).unwrap();
    let script = folder.join("vault");
    std::fs::write(&script, "#!/bin/sh\necho 'Vault v1.18.0'\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    folder
}

/// `vault doctor --json`'s `vault on PATH` check, with `path` as PATH.
fn path_check(v: &mut TestVault, path: &str) -> serde_json::Value {
    let mut c = v.command(&["doctor", "--json"]);
    c.env("PATH", path);
    let run = v.run_command(&mut c, None);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "vault on PATH")
        .unwrap_or_else(|| panic!("no `vault on PATH` check: {report}"))
        .clone()
}

#[test]
fn doctor_notices_when_vault_on_path_is_another_program() {
    let mut v = TestVault::init("one-name-doctor");
    let other = hashicorp_vault(v.dir.path());
    let ours = Path::new(bin()).parent().unwrap();
    let links = agent_vault_dir();

    // HashiCorp's `vault` first on PATH, and no agent-vault: a warning naming both, and the fix.
    let c = path_check(&mut v, other.to_str().unwrap());
    let detail = c["detail"].as_str().unwrap();
    assert_eq!(c["warning"], true, "{c}");
    assert!(
        detail.contains(&format!(
            "`vault` on your PATH is {}/vault, not this program",
            other.display()
        )) && detail.contains("HashiCorp Vault")
            && detail.contains("ln -s ")
            && detail.contains("~/.local/bin/agent-vault"),
        "{detail}"
    );
    // This program's folder later on PATH: the link goes beside it, where PATH already looks
    // (after `cargo install`, ~/.cargo/bin, as the README says).
    let c = path_check(&mut v, &format!("{}:{}", other.display(), ours.display()));
    let detail = c["detail"].as_str().unwrap();
    let ours_real = std::fs::canonicalize(ours).unwrap();
    assert!(
        detail.contains(&format!(
            "`ln -s vault {}/agent-vault`",
            ours_real.display()
        )),
        "{detail}"
    );
    // With agent-vault on PATH too, the warning says to use it.
    let c = path_check(&mut v, &format!("{}:{}", other.display(), links.display()));
    assert_eq!(c["warning"], true, "{c}");
    assert!(
        c["detail"]
            .as_str()
            .unwrap()
            .contains("run this one as `agent-vault` (on your PATH)"),
        "{c}"
    );
    // This program first: fine.
    let c = path_check(&mut v, &format!("{}:{}", ours.display(), other.display()));
    assert_eq!(c["warning"], false, "{c}");
    assert!(
        c["detail"].as_str().unwrap().contains("is this program"),
        "{c}"
    );
    // Only agent-vault: fine.
    let c = path_check(&mut v, links.to_str().unwrap());
    assert_eq!(c["warning"], false, "{c}");
    assert!(
        c["detail"]
            .as_str()
            .unwrap()
            .contains("`agent-vault` is this program"),
        "{c}"
    );
}

#[test]
fn agent_vault_is_the_same_program() {
    let mut v = TestVault::init("one-name-alias");
    let alias = agent_vault_dir().join("agent-vault");
    let mut c = std::process::Command::new(&alias);
    c.args([
        "--vault-dir",
        v.vault_dir().to_str().unwrap(),
        "list",
        "--json",
    ]);
    let run = v.run_command(&mut c, None).ok();
    let listed: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(listed.is_array() || listed.is_object(), "{listed}");
    // Its usage names it as typed.
    let mut c = std::process::Command::new(&alias);
    c.arg("--help");
    let help = v.run_command(&mut c, None).ok();
    assert!(
        help.stdout.contains("Usage: agent-vault"),
        "{}",
        help.stdout
    );
}
