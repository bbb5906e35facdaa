//! Rotation that cannot half-apply (issue "(2 of 5)"): `vault edit NAME --key-file FILE` against a
//! real sshd that, after the rotation, authorizes only the new key. The command runs on the same
//! MCP session after the edit, sshd's log shows the new key accepted, the connection pooled under
//! the old version is not reused, and the flags that would store a broken key are refused with
//! the right flag named and nothing changed.
mod support;

use serde_json::{json, Value};
use std::process::Command;
use support::ssh::{add_ssh, exec, keygen, mcp, text_of, token, LocalUser};
use support::sshd::{fingerprint, Sshd};
use support::*;

fn version_of(v: &mut TestVault, name: &str) -> i64 {
    let list = v.run(&["list", "--json"], None).ok();
    let all: Value = serde_json::from_str(&list.stdout).unwrap();
    all.as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("{name} not listed: {}", list.stdout))["version"]
        .as_i64()
        .unwrap()
}

/// sshd's "Accepted publickey" lines, each with the key's fingerprint.
fn accepted(sshd: &Sshd) -> Vec<String> {
    sshd.log()
        .lines()
        .filter(|l| l.contains("Accepted publickey"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_rotated_ssh_key_logs_in_and_the_old_connection_is_not_reused() {
    let mut v = TestVault::init("rotate-ssh");
    let dir = v.dir.path().to_owned();
    let old = keygen(&dir, "old_key", &["-t", "ed25519"], "");
    let new = keygen(&dir, "new_key", &["-t", "ed25519"], "new key phrase");
    let new_fp = fingerprint(&new.private.with_extension("pub"));
    let old_fp = fingerprint(&old.private.with_extension("pub"));
    let sshd = Sshd::start_with(&old.public, "LogLevel VERBOSE");
    add_ssh(
        &mut v,
        "web",
        &sshd,
        "root",
        &["--key-file", old.private.to_str().unwrap()],
        None,
        "never",
        None,
    )
    .ok();

    let mut p = mcp(&v, None);
    let first = exec(&mut p, 1, "web", "echo before", json!({}));
    assert_eq!(text_of(&first, "stdout").trim(), "before", "{first}");
    let logins = accepted(&sshd);
    assert_eq!(logins.len(), 1, "{logins:?}");
    assert!(logins[0].contains(&old_fp), "{logins:?}");

    // The server now takes only the new key.
    std::fs::write(sshd.dir.path().join("authorized_keys"), &new.public).unwrap();

    // A key given as a line of text is refused, naming the right flag; nothing changed.
    let dotenv = dir.join(".env");
    std::fs::write(&dotenv, "WEB_KEY=not-a-key\n").unwrap();
    let from = format!("env:{}#WEB_KEY", dotenv.display());
    for flags in [
        vec!["--secret-file", new.private.to_str().unwrap()],
        vec!["--secret-stdin"],
        vec!["--secret-from", from.as_str()],
    ] {
        let mut args = vec!["edit", "web"];
        args.extend(flags.iter().copied());
        let r = v.run_pp(&args, Some("not-a-key\n"));
        assert_ne!(r.code, 0, "{r:?}");
        assert!(r.stderr.contains("--key-file FILE"), "{}", r.stderr);
        assert!(r.stderr.contains("nothing was changed"), "{}", r.stderr);
    }
    assert_eq!(version_of(&mut v, "web"), 1);

    // The encrypted new key: its passphrase asked on the terminal, then the vault passphrase.
    let edited = v.run_tty(
        &["edit", "web", "--key-file", new.private.to_str().unwrap()],
        &[
            ("Passphrase of", "new key phrase\n"),
            ("Vault passphrase", &format!("{PASSPHRASE}\n")),
        ],
    );
    assert_eq!(edited.code, 0, "{edited:?}");
    assert!(
        edited
            .stdout
            .contains(&format!("New key: ssh-ed25519 {new_fp}")),
        "{}",
        edited.stdout
    );
    assert!(edited.stdout.contains("version 2"), "{}", edited.stdout);
    assert_eq!(version_of(&mut v, "web"), 2);

    // The same MCP session: the command runs, on a new connection made with the new key.
    let second = exec(&mut p, 2, "web", "echo after", json!({}));
    assert_eq!(text_of(&second, "stdout").trim(), "after", "{second}");
    let logins = accepted(&sshd);
    assert_eq!(logins.len(), 2, "the old connection was reused: {logins:?}");
    assert!(logins[1].contains(&new_fp), "{logins:?}");

    // `vault list` shows the new key.
    let list = v.run(&["list", "--json"], None).ok();
    assert!(list.stdout.contains(&new_fp), "{}", list.stdout);
    assert!(!list.stdout.contains(&old_fp), "{}", list.stdout);
}

#[test]
fn an_http_secret_is_not_changed_with_ssh_flags_and_the_reverse() {
    let mut v = TestVault::init("rotate-kinds");
    v.add_bearer("api", "http://127.0.0.1:9", "DECOY_rotation_tok_51f0");
    let key = keygen(v.dir.path(), "k", &["-t", "ed25519"], "");
    let r = v.run_pp(
        &["edit", "api", "--key-file", key.private.to_str().unwrap()],
        None,
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--secret-file FILE"), "{}", r.stderr);
    let r = v.run(
        &["edit", "api", "--password-stdin", "--passphrase-stdin"],
        Some("x\n"),
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(version_of(&mut v, "api"), 1);
}

#[test]
fn a_rotated_password_logs_in_on_a_new_connection() {
    let (old, new) = (format!("pw-{}", token("o")), format!("pw-{}", token("n")));
    let user = LocalUser::create(&old);
    let sshd = Sshd::start_with("", "LogLevel VERBOSE");
    let mut v = TestVault::init("rotate-pw");
    add_ssh(
        &mut v,
        "box",
        &sshd,
        &user.name,
        &["--password-stdin"],
        Some(&old),
        "never",
        None,
    )
    .ok();
    let mut p = mcp(&v, None);
    let first = exec(&mut p, 1, "box", "echo one", json!({}));
    assert_eq!(text_of(&first, "stdout").trim(), "one", "{first}");

    // The account's password changes, then the vault's.
    let mut child = Command::new("chpasswd")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    writeln!(child.stdin.take().unwrap(), "{}:{new}", user.name).unwrap();
    assert!(child.wait().unwrap().success());
    let edited = v
        .run_pp(
            &["edit", "box", "--password-stdin"],
            Some(&format!("{new}\n")),
        )
        .ok();
    assert!(edited.stdout.contains("version 2"), "{}", edited.stdout);

    let second = exec(&mut p, 2, "box", "echo two", json!({}));
    assert_eq!(text_of(&second, "stdout").trim(), "two", "{second}");
    let accepted = sshd
        .log()
        .lines()
        .filter(|l| l.contains(&format!("Accepted password for {}", user.name)))
        .count();
    assert_eq!(
        accepted, 2,
        "a connection made with the old password was reused"
    );
    for out in [&edited.stdout, &edited.stderr] {
        assert!(!out.contains(&new) && !out.contains(&old));
    }
}
