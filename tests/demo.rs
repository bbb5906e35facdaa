//! `vault demo` end to end: without a terminal it approves through the scripted path and says
//! so; in a real terminal it opens the real card (`vault approve`), and Ctrl-C leaves neither
//! its agent nor its vault behind. Exit 0 only if every step succeeded.
mod support;

use support::pty;
use support::*;

fn demo_command() -> std::process::Command {
    let mut c = std::process::Command::new(bin());
    c.arg("demo")
        .env("VAULT_KEYRING", "kernel")
        .env_remove("VAULT_DIR")
        .env_remove("VAULT_PASSPHRASE_FILE");
    c
}

#[test]
fn the_demo_runs_the_whole_flow_without_a_terminal() {
    let out = demo_command()
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("approving through the scripted path"),
        "{stdout}"
    );
    assert!(stdout.contains("Bearer [REDACTED:demo-api]"), "{stdout}");
    assert!(
        stdout.contains("logged in with password [REDACTED:demo-ssh]")
            && stdout.contains("ran `login-info` once, exit status 0"),
        "{stdout}"
    );
    assert!(stdout.contains("Journal verified"), "{stdout}");
    assert!(stdout.contains("Demo complete"), "{stdout}");
}

#[test]
fn the_demo_shows_the_real_card_on_a_terminal() {
    // As a person runs it: not root (root reads any process's program; a person's agent cannot
    // read the undumpable demo's).
    if !support::uid::run_unprivileged("the_demo_shows_the_real_card_on_a_terminal") {
        return;
    }
    // Two cards of the real `vault approve`: the HTTP action, then the SSH one. After each
    // decision the screen says nothing waits, and [q] goes back to the demo.
    // The demo vault's approval PIN is printed (a real vault's never is) and typed after [a].
    let script = serde_json::to_string(&[
        (r"re:approval PIN is (\d+)", "", 0.1),
        ("[a]pprove once", "a", 0.8),
        ("PIN to approve", "$1\r", 0.2),
        ("No action waits", "q", 0.3),
        ("(credential demo-ssh)", "", 0.1),
        ("[a]pprove once", "a", 0.8),
        ("PIN to approve", "$1\r", 0.2),
        ("No action waits", "q", 0.3),
    ])
    .unwrap();
    let out = drive_demo(&script);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("Action 1 of 1 waiting") && text.contains("Demo complete"),
        "{text}"
    );
    assert!(!text.contains("scripted path"), "{text}");
    assert!(
        !text.contains("(passphrase"),
        "the passphrase is never shown: {text}"
    );
    // The card names the client and what started it (the demo hides its own memory, so the
    // card says so instead of "(?)", issue 48).
    let client = text
        .lines()
        .find(|l| l.contains("client ") && l.contains("vault-demo"))
        .unwrap_or_else(|| panic!("no client line: {text}"));
    assert!(!client.contains("(?)"), "{client}");
    assert!(
        client.contains("whose program cannot be read") || client.contains('/'),
        "{client}"
    );
}

#[test]
fn a_denial_in_the_demo_is_shown_working_and_the_demo_exits_1() {
    // The person denies the HTTP card and approves the SSH one: the denial sends nothing, every
    // step still runs (the journal verifies), and the demo does not claim success.
    let script = serde_json::to_string(&[
        (r"re:approval PIN is (\d+)", "", 0.1),
        ("[a]pprove once", "d", 0.8),
        ("Reason for the agent", "\r", 0.2),
        ("No action waits", "q", 0.3),
        ("(credential demo-ssh)", "", 0.1),
        ("[a]pprove once", "a", 0.8),
        ("PIN to approve", "$1\r", 0.2),
        ("No action waits", "q", 0.3),
    ])
    .unwrap();
    let out = drive_demo(&script);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("7. Denied") && text.contains("Journal verified"),
        "{text}"
    );
    assert!(
        text.contains("you denied 1 of the demo's 2 actions"),
        "{text}"
    );
    assert!(!text.contains("got its requests done"), "{text}");
}

#[test]
fn ctrl_c_on_the_demo_leaves_no_agent_and_no_vault() {
    // Ctrl-C typed on the card (the card reads it as a key and quits), and SIGINT to the demo
    // itself: either way its agent stops and its throwaway vault is deleted.
    for how in ["key", "signal"] {
        let mut c = std::process::Command::new(bin());
        c.arg("demo")
            .env("VAULT_KEYRING", "kernel")
            .env_remove("VAULT_DIR")
            .env_remove("VAULT_PASSPHRASE_FILE");
        let mut s = pty::PtySession::spawn(c, None);
        assert!(
            s.wait_for("[a]pprove once", std::time::Duration::from_secs(60)),
            "{how}: no card: {}",
            s.output()
        );
        let dir = std::env::temp_dir().join(format!("agent-vault-demo-{}", s.pid()));
        assert!(dir.join("vault.db").exists(), "{how}: {}", dir.display());
        std::thread::sleep(std::time::Duration::from_millis(600));
        match how {
            "key" => s.send("\u{3}"),
            _ => {
                let _ = std::process::Command::new("kill")
                    .args(["-INT", &s.pid().to_string()])
                    .status();
            }
        }
        let code = s.finish(std::time::Duration::from_secs(30));
        assert_ne!(code, Some(0), "{how}: an interrupted demo does not succeed");
        assert!(
            !dir.exists(),
            "{how}: the demo vault was left in {}",
            dir.display()
        );
        let agents = std::process::Command::new("pgrep")
            .args(["-f", &format!("agent-vault-demo-{}", s.pid())])
            .output()
            .unwrap();
        assert!(
            agents.stdout.is_empty(),
            "{how}: a process of the demo is still running: {}",
            String::from_utf8_lossy(&agents.stdout)
        );
    }
}

/// `vault demo` on a real pty, driven by `script` (tests/support/pty_drive.py's steps), with no
/// vault of the person's in its environment.
fn drive_demo(script: &str) -> std::process::Output {
    std::process::Command::new(python())
        .arg(support_file("pty_drive.py"))
        .arg(script)
        .args(["--", bin(), "demo"])
        .env("VAULT_KEYRING", "kernel")
        .env_remove("VAULT_DIR")
        .env_remove("VAULT_PASSPHRASE_FILE")
        .output()
        .unwrap()
}
