//! What a newcomer looks for (issue "(2 of 5)", item 4), through the real binary: `vault status`
//! (locked or up, pause, waiting actions, grants, PIN, the last anchor; exit 0 up, 4 locked or
//! paused; no prompt), `vault show NAME` (binding, policy in force, grants, last use; never the
//! secret), and credential and profile names completed by bash, fish and zsh through each shell's
//! own protocol from the running agent (none, and no prompt, when locked).
mod support;

use serde_json::{json, Value};
use std::time::Duration;
use support::completion::offered;
use support::mcp::McpProc;
use support::target::HttpTarget;
use support::*;

const SECRET: &str = "DECOY_status_tok_9a41c2";

fn status_json(v: &mut TestVault, with_passphrase: bool) -> (i32, Value) {
    let r = if with_passphrase {
        v.run_pp(&["status", "--json"], None)
    } else {
        v.run(&["status", "--json"], None)
    };
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    (r.code, serde_json::from_str(r.stdout.trim()).unwrap())
}

#[test]
fn status_and_show_say_what_holds_and_never_the_secret() {
    let target = HttpTarget::start(SECRET);
    let mut v = TestVault::init("status");
    v.add_bearer("api", &target.base(), SECRET);
    let mut outputs = String::new();

    // Up: exit 0, nothing waits, no grant.
    let (code, s) = status_json(&mut v, false);
    assert_eq!(code, 0, "{s}");
    assert_eq!(s["agent"]["state"], "up", "{s}");
    assert_eq!(
        (s["pending"].clone(), s["grants"].clone()),
        (json!(0), json!(0))
    );
    assert_eq!(s["pin_set"], true);
    let shown = v.run(&["show", "api"], None).ok();
    assert!(
        shown.stdout.contains("last used  never"),
        "{}",
        shown.stdout
    );
    assert!(shown.stdout.contains("approval   each"), "{}", shown.stdout);
    outputs += &shown.stdout;

    // An action waits: status counts it.
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let url = format!("{}/repos/acme/app/issues", target.base());
    p.send(
        &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "http_request",
        "arguments": {"credential": "api", "method": "GET", "url": url, "wait_s": 30}}}),
    );
    let act = v.pending_with("/repos/acme/app/issues")["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let text = v.run(&["status"], None).ok();
    assert!(
        text.stdout.contains("waiting  1 action(s)"),
        "{}",
        text.stdout
    );
    outputs += &text.stdout;

    // Approved for the session: it ran, a grant covers the credential, `show` says both.
    v.run(
        &[
            "approve",
            "--id",
            &act,
            "--approve-session",
            "--passphrase-stdin",
        ],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    let (done, _) = p.until_id(&json!(7), Duration::from_secs(30));
    assert_eq!(done["result"]["structuredContent"]["state"], "completed");
    let (_, s) = status_json(&mut v, false);
    assert_eq!(
        (s["pending"].clone(), s["grants"].clone()),
        (json!(0), json!(1))
    );
    let shown = v.run(&["show", "api", "--json"], None).ok();
    let j: Value = serde_json::from_str(shown.stdout.trim()).unwrap();
    assert_eq!(j["credential"]["name"], "api");
    assert_eq!(j["grants"].as_array().unwrap().len(), 1, "{j}");
    assert_eq!(j["last_used"]["action_id"], act.as_str(), "{j}");
    assert_eq!(j["last_used"]["state"], "completed", "{j}");
    outputs += &shown.stdout;
    let shown = v.run(&["show", "api"], None).ok();
    assert!(
        shown.stdout.contains("  grant      grt_"),
        "{}",
        shown.stdout
    );
    let used = shown
        .stdout
        .lines()
        .find(|l| l.starts_with("  last used"))
        .unwrap();
    assert!(
        used.contains("/repos/acme/app/issues") && used.ends_with("(completed)"),
        "{used}"
    );
    // Local time with its offset for a person (`14:01:38 +00:00`).
    let added = shown
        .stdout
        .lines()
        .find(|l| l.starts_with("  added"))
        .unwrap();
    let offset = added.split_whitespace().nth(3).unwrap();
    assert!(
        offset.len() == 6 && (offset.starts_with('+') || offset.starts_with('-')),
        "{added}"
    );
    outputs += &shown.stdout;
    drop(p);

    // Paused: exit 4, and the reason shown.
    v.run(&["pause", "--reason", "lunch"], None).ok();
    let r = v.run(&["status"], None);
    assert_eq!(r.code, 4, "{r:?}");
    assert!(r.stdout.contains("PAUSED (lunch)"), "{}", r.stdout);
    v.run_pp(&["resume"], None).ok();

    // A name that is not there: says where to look.
    let r = v.run(&["show", "nope"], None);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("`vault list`"), "{}", r.stderr);

    // Locked: exit 4, no prompt; with the passphrase given, the store's part too.
    v.run(&["lock"], None).ok();
    let (code, s) = status_json(&mut v, false);
    assert_eq!(code, 4);
    assert_eq!(s["agent"]["state"], "locked");
    assert!(s.get("pending").is_none(), "{s}");
    let (code, s) = status_json(&mut v, true);
    assert_eq!(code, 4);
    assert_eq!(s["paused"], Value::Null, "{s}");
    assert!(s["journal_head"].as_i64().unwrap() > 5, "{s}");
    assert!(s["anchor"]["seq"].as_i64().unwrap() > 0, "{s}");
    let r = v.run(&["status"], None);
    outputs += &r.stdout;
    outputs += &r.stderr;

    for enc in encodings(SECRET) {
        assert!(
            !outputs.contains(&enc),
            "the secret ({enc}) was shown:\n{outputs}"
        );
    }
}

#[test]
fn credential_and_profile_names_complete_in_bash_fish_and_zsh() {
    let mut v = TestVault::init("complete");
    v.add_bearer("github", "https://api.github.com", SECRET);
    v.add_bearer_with(
        "gitlab",
        "https://gitlab.com",
        SECRET,
        &["--profile", "work"],
    );
    let bin_dir = v.dir.path().join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    std::os::unix::fs::symlink(bin(), bin_dir.join("vault")).unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let dir = v.vault_dir().display().to_string();
    let env = [("VAULT_DIR", dir.as_str())];
    for shell in ["bash", "fish"] {
        let script = v.dir.path().join(format!("vault.{shell}"));
        std::fs::write(&script, v.run(&["completions", shell], None).ok().stdout).unwrap();
        let names = offered(shell, &script, &path, "vault edit gi", &env);
        assert!(names.contains(&"github".to_owned()), "{shell}: {names:?}");
        assert!(names.contains(&"gitlab".to_owned()), "{shell}: {names:?}");
        let profiles = offered(shell, &script, &path, "vault list --profile ", &env);
        assert!(
            profiles.contains(&"work".to_owned()) && profiles.contains(&"default".to_owned()),
            "{shell}: {profiles:?}"
        );
        for enc in encodings(SECRET) {
            assert!(!names.iter().any(|n| n.contains(&enc)));
        }
    }

    // zsh: the script registers its function with compinit, and that function's call (the
    // engine's zsh protocol) offers the names.
    let script = v.dir.path().join("_vault");
    std::fs::write(&script, v.run(&["completions", "zsh"], None).ok().stdout).unwrap();
    let out = std::process::Command::new("zsh")
        .args([
            "-f",
            "-c",
            "autoload -Uz compinit && compinit -u && source $1 && print -r -- ${_comps[vault]}",
            "zsh",
        ])
        .arg(&script)
        .env("PATH", &path)
        .output()
        .expect("zsh (apt-get install -y zsh; .ci/run does)");
    let registered = String::from_utf8_lossy(&out.stdout);
    assert!(
        registered.contains("_clap_dynamic_completer_vault"),
        "{registered} {out:?}"
    );
    let out = std::process::Command::new("vault")
        .args(["--", "vault", "rm", ""])
        .env("PATH", &path)
        .env("VAULT_DIR", &dir)
        .env("COMPLETE", "zsh")
        .env("_CLAP_COMPLETE_INDEX", "2")
        .env("_CLAP_IFS", "\n")
        .output()
        .unwrap();
    let zsh_names = String::from_utf8_lossy(&out.stdout);
    assert!(
        zsh_names.lines().any(|l| l.starts_with("github")),
        "{zsh_names}"
    );

    // Locked: no names, no prompt, and quickly.
    v.run(&["lock"], None).ok();
    let script = v.dir.path().join("vault.bash");
    let start = std::time::Instant::now();
    let names = offered("bash", &script, &path, "vault edit gi", &env);
    assert!(names.is_empty(), "{names:?}");
    assert!(start.elapsed() < Duration::from_secs(5));
}
