//! The SSH command allowlist through the real binaries against a real OpenSSH `sshd` on loopback
//! (the remote side is this machine). sshd runs every command it is sent through a recorder
//! (`ForceCommand`) that appends the received string to a file and hands it to bash, the shell
//! that decodes `$'…'`. Under `git ls-remote *`, the `$'…'` smuggle and a `--upload-pack=`
//! injection (live payloads: the test first runs them locally and sees them act) are refused at
//! submission: no marker file, no login, nothing received, no action row, one `call.rejected`
//! row each. A plain command the allowlist admits runs, and what sshd received is its words
//! single-quoted, each one argument at the target.
mod support;

use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::ssh::*;
use support::sshd::Sshd;
use support::*;

/// `dir/name`, an executable shell script with `body`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs `cmd` with bash here, as the remote side would, in `dir`.
fn bash_here(cmd: &str, dir: &Path) {
    let _ = Command::new("bash")
        .args(["-c", cmd])
        .current_dir(dir)
        .output()
        .unwrap();
}

fn count(v: &TestVault, sql: &str) -> i64 {
    v.open_db()
        .store
        .conn()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

fn assert_denied(r: &Value, what: &str) {
    assert_eq!(r["isError"], true, "{what}: {r}");
    let sc = &r["structuredContent"];
    assert_eq!(sc["error"]["code"], "policy_denied", "{what}: {r}");
    assert!(sc.get("action_id").is_none(), "{what} made an action: {r}");
    assert!(sc.get("ssh").is_none(), "{what} ran: {r}");
}

#[test]
fn smuggled_options_are_refused_and_plain_words_arrive_quoted() {
    for program in ["git", "bash"] {
        assert!(
            have(program),
            "{program} not found: install it (`apt-get install -y {program}`)"
        );
    }
    let mut v = TestVault::init("ssh-allow");
    let dir = v.dir.path().to_owned();
    let key = keygen(&dir, "id_ed25519", &["-t", "ed25519"], "");
    let received = dir.join("received.log");
    let recorder = script(
        &dir,
        "recorder.sh",
        &format!(
            "printf '%s\\n' \"$SSH_ORIGINAL_COMMAND\" >> '{}'\nexec bash -c \"$SSH_ORIGINAL_COMMAND\"",
            received.display()
        ),
    );
    let sshd = Sshd::start_with(
        &key.public,
        &format!("LogLevel VERBOSE\nForceCommand {}", recorder.display()),
    );
    let f = key.private.to_str().unwrap();
    add_ssh(
        &mut v,
        "box",
        &sshd,
        "root",
        &[
            "--key-file",
            f,
            "--allow-command",
            "git ls-remote *",
            "--allow-command",
            "printf %s: * && echo done",
        ],
        None,
        "never",
        None,
    )
    .ok();

    // Two payloads under `git ls-remote *`: bash decodes the first into a command git runs
    // through `sh -c`; the second names a program planted earlier, with no shell syntax at all.
    let (smuggled, injected) = (dir.join("pwned-smuggle"), dir.join("pwned-option"));
    let evil = script(
        &dir,
        "evil.sh",
        &format!("touch '{}'\nexit 1", injected.display()),
    );
    let repo = dir.display();
    let payloads = [
        format!(
            r"git ls-remote --upload-pack=$'touch\x20{}\x3b\x20false\x20#' {repo}",
            smuggled.display()
        ),
        format!("git ls-remote --upload-pack={} {repo}", evil.display()),
    ];
    // They are live: run here by bash, each leaves its marker.
    for (cmd, marker) in payloads.iter().zip([&smuggled, &injected]) {
        bash_here(cmd, &dir);
        assert!(marker.exists(), "the payload {cmd:?} is a dud here");
        std::fs::remove_file(marker).unwrap();
    }

    let mut p = mcp(&v, None);
    let refusals: Vec<Value> = (1..)
        .zip(&payloads)
        .map(|(id, cmd)| exec(&mut p, id, "box", cmd, json!({})))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !smuggled.exists(),
        "the `$'…'` smuggle ran: {}",
        refusals[0]
    );
    assert!(
        !injected.exists(),
        "the --upload-pack= injection ran: {}",
        refusals[1]
    );
    assert!(!received.exists(), "sshd was sent a refused command");
    for (r, cmd) in refusals.iter().zip(&payloads) {
        assert_denied(r, cmd);
        let msg = r["structuredContent"]["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("git ls-remote *"),
            "the patterns are named: {msg}"
        );
    }
    let log = sshd.log();
    assert!(!log.contains("Accepted"), "a refused call logged in: {log}");
    assert_eq!(count(&v, "SELECT count(*) FROM actions"), 0);
    assert_eq!(
        count(
            &v,
            "SELECT count(*) FROM audit WHERE kind = 'call.rejected'"
        ),
        2
    );

    // Allowed: sent as single-quoted words and the `&&` the pattern spells, received as such,
    // each word one argument of printf.
    let r = exec(
        &mut p,
        3,
        "box",
        "printf %s: one two=2 /x,y && echo done",
        json!({}),
    );
    let sent = "'printf' '%s:' 'one' 'two=2' '/x,y' && 'echo' 'done'";
    let sc = &r["structuredContent"];
    assert_eq!(sc["state"], "completed", "{r}");
    assert!(
        sc["summary"].as_str().unwrap().contains(sent),
        "the action is the sent form: {r}"
    );
    assert_eq!(text_of(&r, "stdout"), "one:two=2:/x,y:done\n");
    assert_eq!(
        std::fs::read_to_string(&received).unwrap(),
        format!("{sent}\n"),
        "what sshd received"
    );
    assert_eq!(sshd.log().matches("Accepted publickey for root").count(), 1);
    assert_eq!(count(&v, "SELECT count(*) FROM actions"), 1);
    p.finish(Duration::from_secs(10));
}
