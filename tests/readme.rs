//! The README's command lines run as written, without a terminal, against a throwaway vault: every
//! line of its `sh` blocks whose command is `vault`, `mkdir` or an `echo` of a `vault` line into
//! `~/.bashrc` (continuations joined, comments kept), in a fresh HOME holding the files the lines name (`token.txt`, `~/.ssh/id_ed25519`),
//! with the passphrase in `VAULT_PASSPHRASE_FILE` as the README says. Lines for other programs
//! (cargo, sudo, claude), `vault run -- CLIENT` (an AI client), the interactive `vault approve`
//! (a person at the card) and team mode's (an OpenBao server; tests/team_mode.rs) are listed and
//! skipped.
mod support;

use std::path::Path;
use std::process::Command;
use support::*;

/// The command lines of the README's ```sh blocks, continuations joined.
fn sh_lines(readme: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut pending = String::new();
    for line in readme.lines() {
        if line.starts_with("```") {
            in_block = line == "```sh";
            continue;
        }
        if !in_block {
            continue;
        }
        let trimmed = line.trim_end();
        if let Some(head) = trimmed.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(line.trim());
        if !pending.is_empty() {
            out.push(std::mem::take(&mut pending));
        }
        pending.clear();
    }
    out
}

#[test]
fn every_vault_line_of_the_readme_runs_as_written() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let lines = sh_lines(&readme);
    let dir = TempDir::new("readme");
    let home = dir.path().join("home");
    let work = dir.path().join("work");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("token.txt"), "DECOY_readme_tok_5e1\n").unwrap();
    // "Bring your secrets in": the project's plain-text token that `vault scan` finds.
    std::fs::write(
        work.join(".env"),
        "PORT=8080\nSTRIPE_KEY=sk_live_DECOY_readme_51c0\n",
    )
    .unwrap();
    let keygen = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(home.join(".ssh/id_ed25519"))
        .status()
        .unwrap();
    assert!(keygen.success());
    let pp = dir.path().join("passphrase");
    std::fs::write(&pp, format!("{PASSPHRASE}\n")).unwrap();
    let bin_dir = Path::new(bin()).parent().unwrap().to_owned();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let vault_dir = dir.path().join("vault");
    let mut ran = Vec::new();
    let mut skipped = Vec::new();
    for line in &lines {
        let first = line.split_whitespace().next().unwrap_or("");
        // `vault run -- CLIENT` starts an AI client (tests/ai_clients.rs runs real ones so), and
        // the interactive `vault approve` waits for a person (tests/approval_card.rs drives it).
        let person = line.starts_with("vault approve ") && !line.contains("--id");
        // Team mode's lines need the team's OpenBao (tests/team_mode.rs runs each of these
        // commands against a real `bao server -dev`).
        let team = line.contains("openbao");
        // `echo '…vault…' >> ~/.bashrc`: the completion set-up, checked below.
        let vault_echo = first == "echo" && line.contains("vault");
        if !(matches!(first, "vault" | "mkdir") || vault_echo)
            || line.starts_with("vault run ")
            || person
            || team
        {
            skipped.push(line.clone());
            continue;
        }
        let out = Command::new("sh")
            .arg("-c")
            .arg(line)
            .current_dir(&work)
            .env("HOME", &home)
            .env("PATH", &path)
            .env("VAULT_DIR", &vault_dir)
            .env("VAULT_PASSPHRASE_FILE", &pp)
            .env_remove("VAULT_LOG")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        // A line whose comment says `exits N` must exit N (`vault scan` finding something).
        let want = line
            .split_once("# exits ")
            .and_then(|(_, c)| c.split(':').next()?.trim().parse::<i32>().ok())
            .unwrap_or(0);
        assert!(
            out.status.code() == Some(want),
            "README line failed ({}, want exit {want}): {line}\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ran.push(line.clone());
    }
    eprintln!(
        "ran {} README lines; skipped (other programs): {skipped:#?}",
        ran.len()
    );
    for want in [
        "vault init",
        "vault add http",
        "vault add ssh",
        "vault doctor",
        "vault completions",
        "vault scan",
        "vault setup claude",
    ] {
        assert!(
            ran.iter()
                .any(|l| l.starts_with(want) || l.contains(&format!("<({want}"))),
            "the README no longer has a `{want}` line to run: {ran:#?}"
        );
    }
    // What the lines did: both credentials are there, and the completion script was written.
    let mut list = Command::new(bin());
    list.args(["list"])
        .env("VAULT_DIR", &vault_dir)
        .env("VAULT_PASSPHRASE_FILE", &pp);
    let listed = String::from_utf8_lossy(&list.output().unwrap().stdout).into_owned();
    assert!(
        listed.contains("github") && listed.contains("web1") && listed.contains("stripe"),
        "{listed}"
    );
    // The import commented the line out, naming the credential, and kept the rest.
    let env = std::fs::read_to_string(work.join(".env")).unwrap();
    assert!(env.starts_with("PORT=8080\n"), "{env}");
    assert!(
        !env.contains("DECOY_readme_51c0") && env.contains("stripe"),
        "{env}"
    );
    // The ~/.bashrc line completes both names in a bash without the bash-completion package.
    let bash = Command::new("bash")
        .args([
            "--norc",
            "--noprofile",
            "-c",
            "source ~/.bashrc && complete -p vault && complete -p agent-vault",
        ])
        .env("HOME", &home)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(
        bash.status.success(),
        "{}{}",
        String::from_utf8_lossy(&bash.stdout),
        String::from_utf8_lossy(&bash.stderr)
    );
    let _ = Command::new(bin())
        .arg("lock")
        .env("VAULT_DIR", &vault_dir)
        .output();
}

/// ARCHITECTURE.md stays one page (at most 150 lines), and every test it names as the keeper of an
/// invariant exists.
#[test]
fn the_architecture_is_one_page_and_names_real_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    assert!(
        text.lines().count() <= 150,
        "ARCHITECTURE.md has {} lines",
        text.lines().count()
    );
    let mut named = 0;
    for part in text.split("`tests/").skip(1) {
        let file = part.split(['`', ' ']).next().unwrap();
        if !file.ends_with(".rs") {
            continue;
        }
        named += 1;
        assert!(
            root.join("tests").join(file).exists(),
            "ARCHITECTURE.md names tests/{file}"
        );
    }
    assert!(named >= 15, "{named} tests named");
}
