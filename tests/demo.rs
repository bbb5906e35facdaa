//! `vault demo` end to end: without a terminal it approves through the scripted path and says
//! so; in a real terminal it asks, and a "y" approves. Exit 0 only if every step succeeded.
mod support;

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
fn the_demo_asks_a_person_on_a_terminal() {
    // Two cards: the HTTP action, then the SSH one (its summary names the credential).
    let script =
        serde_json::to_string(&[("Approve? [y/N]", "y\n"), ("(credential demo-ssh)", "y\n")])
            .unwrap();
    let out = std::process::Command::new(python())
        .arg(support_file("pty_drive.py"))
        .arg(script)
        .args(["--", bin(), "demo"])
        .env("VAULT_KEYRING", "kernel")
        .env_remove("VAULT_DIR")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("APPROVAL NEEDED") && text.contains("Demo complete"),
        "{text}"
    );
    assert!(!text.contains("scripted path"), "{text}");
}
