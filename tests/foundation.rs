//! The foundation through the real `vault` binary: init, credentials, lock/unlock, exit codes,
//! file modes, recovery with the stock `age` CLI and a SQLCipher 4 tool, and decoy-secret scans.
mod support;

use serde_json::Value;
use support::*;

const HTTP_DECOY: &str = "DECOY_http_tok_9f3ac2e71b";
const SSH_DECOY: &str = "DECOY_ssh_pw_51d07be3aa";

fn host_key() -> String {
    format!("SHA256:{}", "Qk9vZ1ZhdWx0VGVzdEhvc3RLZXlGaW5nZXJwcmludDA")
}

#[test]
fn non_interactive_flow_works_and_leaks_no_secret_anywhere() {
    let mut v = TestVault::init("flow");
    v.run_pp(
        &[
            "add",
            "http",
            "api",
            "--host",
            "api.example.com",
            "--path-prefix",
            "/v1/",
            "--methods",
            "GET,POST",
            "--bearer",
            "--secret-stdin",
        ],
        Some(&format!("{HTTP_DECOY}\n")),
    )
    .ok();
    // A policy looser than `each` must be signed: without the passphrase nothing is added.
    let ssh_args = [
        "add",
        "ssh",
        "box",
        "--host",
        "127.0.0.1",
        "--port",
        "2222",
        "--user",
        "deploy",
        "--password-stdin",
        "--host-key",
        &host_key(),
        "--approval",
        "session",
        "--profile",
        "ops",
    ];
    // (No terminal and no passphrase source: a usage error that says how to give it.)
    let r = v.run(&ssh_args, Some(&format!("{SSH_DECOY}\n"))).code(2);
    assert!(r.stderr.contains("--passphrase-stdin"), "{}", r.stderr);
    v.run_pp(
        &[
            "add",
            "ssh",
            "box",
            "--host",
            "127.0.0.1",
            "--port",
            "2222",
            "--user",
            "deploy",
            "--password-stdin",
            "--host-key",
            &host_key(),
            "--approval",
            "session",
            "--profile",
            "ops",
        ],
        Some(&format!("{SSH_DECOY}\n")),
    )
    .ok();
    let list = v.run(&["list", "--json"], None).ok();
    let creds: Vec<Value> = serde_json::from_str(list.stdout.trim()).unwrap();
    assert_eq!(creds.len(), 2);
    let api = creds.iter().find(|c| c["name"] == "api").unwrap();
    assert_eq!(api["kind"], "http");
    assert_eq!(api["profile"], "default");
    assert_eq!(api["approval"], "each");
    assert_eq!(api["target"]["host"], "api.example.com");
    assert_eq!(api["target"]["port"], 443);
    assert_eq!(api["target"]["path_prefix"], "/v1/");
    assert_eq!(api["target"]["methods"], serde_json::json!(["GET", "POST"]));
    let boxc = creds.iter().find(|c| c["name"] == "box").unwrap();
    assert_eq!(boxc["profile"], "ops");
    assert_eq!(boxc["approval"], "session");
    assert_eq!(boxc["target"]["host_key"], host_key());

    let only_ops = v.run(&["list", "--json", "--profile", "ops"], None).ok();
    assert_eq!(
        serde_json::from_str::<Vec<Value>>(only_ops.stdout.trim())
            .unwrap()
            .len(),
        1
    );
    v.run(&["list"], None).ok();
    v.run_pp(
        &["edit", "api", "--approval", "writes", "--methods", "any"],
        None,
    )
    .ok();
    v.run(&["doctor"], None).ok();
    v.run_pp(&["rm", "box", "--profile", "ops"], None).ok();
    let after = v.run(&["list", "--json"], None).ok();
    assert_eq!(
        serde_json::from_str::<Vec<Value>>(after.stdout.trim())
            .unwrap()
            .len(),
        1
    );
    v.run_pp(&["rm", "box", "--profile", "ops"], None).code(1);

    // The database is encrypted and no decoy is in any file, stdout or stderr.
    let db = std::fs::read(v.vault_dir().join("vault.db")).unwrap();
    assert_ne!(&db[..16], b"SQLite format 3\0");
    for f in files_under(&v.vault_dir()) {
        let bytes = std::fs::read(&f).unwrap();
        assert_no_leak(&f.display().to_string(), &bytes, HTTP_DECOY);
        assert_no_leak(&f.display().to_string(), &bytes, SSH_DECOY);
    }
    let all_output = v.transcript.join("\n");
    assert_no_leak("command output", all_output.as_bytes(), HTTP_DECOY);
    assert_no_leak("command output", all_output.as_bytes(), SSH_DECOY);
}

#[test]
fn files_are_private() {
    let v = TestVault::init("modes");
    assert_eq!(mode(&v.vault_dir()), 0o700);
    for f in files_under(&v.vault_dir()) {
        assert_eq!(mode(&f), 0o600, "{}", f.display());
    }
}

#[test]
fn locked_vault_and_wrong_passphrase_exit_4_and_say_what_to_run() {
    let mut v = TestVault::init("locked");
    v.run(&["lock"], None).ok();
    let r = v.run(&["list"], None).code(4);
    assert!(r.stderr.contains("vault unlock"), "{}", r.stderr);
    assert!(
        r.stdout.is_empty(),
        "nothing on stdout on failure: {}",
        r.stdout
    );
    let r = v
        .run(
            &[
                "add",
                "http",
                "x",
                "--host",
                "a.example",
                "--bearer",
                "--secret-stdin",
            ],
            Some("s\n"),
        )
        .code(4);
    assert!(r.stderr.contains("vault unlock"));

    let r = v
        .run(
            &["unlock", "--passphrase-stdin"],
            Some("not the passphrase\n"),
        )
        .code(4);
    assert!(r.stderr.contains("wrong passphrase"), "{}", r.stderr);
    v.run(&["list"], None).code(4);

    // Locked, a person's command that gets the passphrase opens the store in its own process.
    let direct = v.run_pp(&["list", "--json"], None).ok();
    assert_eq!(direct.stdout.trim(), "[]");

    // No terminal and no passphrase source: a usage error (2) with the ways to give one.
    let r = v.run(&["unlock"], None).code(2);
    assert!(r.stderr.contains("--passphrase-stdin"), "{}", r.stderr);

    // VAULT_PASSPHRASE_FILE works; then the agent serves later commands.
    let pp = v.dir.path().join("pp");
    std::fs::write(&pp, format!("{PASSPHRASE}\n")).unwrap();
    let mut c = v.command(&["unlock"]);
    c.env("VAULT_PASSPHRASE_FILE", &pp);
    v.run_command(&mut c, None).ok();
    v.run(&["list"], None).ok();
}

#[test]
fn missing_vault_double_init_and_bad_input_are_clear() {
    let mut v = TestVault::empty("missing");
    let r = v.run(&["list"], None).code(1);
    assert!(r.stderr.contains("vault init"), "{}", r.stderr);
    v.run(&["init", "--passphrase-stdin"], Some("short\n"))
        .code(1);
    assert!(
        !v.vault_dir().join("vault.db").exists(),
        "a refused init leaves nothing"
    );
    v.run(
        &["init", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    let before = std::fs::read(v.vault_dir().join("vault.key.age")).unwrap();
    let r = v
        .run(
            &["init", "--passphrase-stdin"],
            Some("another passphrase\n"),
        )
        .code(1);
    assert!(r.stderr.contains("already holds a vault"), "{}", r.stderr);
    assert_eq!(
        std::fs::read(v.vault_dir().join("vault.key.age")).unwrap(),
        before
    );

    for args in [
        &[
            "add",
            "http",
            "a",
            "--host",
            "http://api.example.com",
            "--bearer",
            "--secret-stdin",
        ][..],
        &[
            "add",
            "http",
            "a",
            "--host",
            "u:p@api.example.com",
            "--bearer",
            "--secret-stdin",
        ],
        &[
            "add",
            "http",
            "a",
            "--host",
            "0x7f000001",
            "--bearer",
            "--secret-stdin",
        ],
        &[
            "add",
            "http",
            "a",
            "--host",
            "api.example.com",
            "--header",
            "X-K",
            "--format",
            "nope",
            "--secret-stdin",
        ],
        &[
            "add",
            "ssh",
            "b",
            "--host",
            "h.example",
            "--user",
            "u",
            "--password-stdin",
            "--host-key",
            "MD5:00",
        ],
        &[
            "add",
            "http",
            "bad name",
            "--host",
            "api.example.com",
            "--bearer",
            "--secret-stdin",
        ],
    ] {
        let r = v.run(args, Some("sekrit\n")).code(2);
        assert!(
            r.stderr.starts_with("error: invalid"),
            "{args:?}: {}",
            r.stderr
        );
    }
    // A secret with a line break inside could split a header: refused.
    v.run_pp(
        &[
            "add",
            "http",
            "a",
            "--host",
            "api.example.com",
            "--bearer",
            "--secret-stdin",
        ],
        Some("\n"),
    )
    .code(1);
    // argv never carries a secret: there is no flag for it.
    v.run_pp(
        &[
            "add",
            "http",
            "a",
            "--host",
            "api.example.com",
            "--bearer",
            "--secret",
            "x",
        ],
        None,
    )
    .code(2);
}

#[test]
fn stock_age_recovers_the_documented_json_and_its_key_opens_the_db_in_sqlcipher() {
    let mut v = TestVault::init("recover");
    v.add_bearer("api", "api.example.com", "tok");
    let key_file = v.vault_dir().join("vault.key.age");
    let out = std::process::Command::new(python())
        .arg(support_file("pty_drive.py"))
        .arg(serde_json::to_string(&[("passphrase", format!("{PASSPHRASE}\n"))]).unwrap())
        .args(["--", "age", "-d"])
        .arg(&key_file)
        .output()
        .expect("run age (apt-get install age; .ci/run does)");
    assert!(
        out.status.success(),
        "age -d failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let json_line = text
        .lines()
        .find(|l| l.contains("\"master_key\""))
        .expect("JSON in age output");
    let json_line = &json_line[json_line.find('{').unwrap()..];
    let doc: Value = serde_json::from_str(json_line.trim()).unwrap();
    assert_eq!(doc["version"], 1);
    let master = doc["master_key"].as_str().unwrap();
    assert_eq!(master.len(), 64);
    assert_eq!(doc["approver_key"].as_str().unwrap().len(), 64);

    // A SQLCipher 4 tool other than ours (Python sqlcipher3) opens it with that raw key.
    let probe = r#"
import sys, sqlcipher3
db, key = sys.argv[1], sys.argv[2]
c = sqlcipher3.connect(db)
c.execute('PRAGMA key = "x\'%s\'"' % key)
c.execute('PRAGMA cipher_hmac_algorithm = HMAC_SHA256')
try:
    print(c.execute("SELECT name FROM credentials").fetchall()[0][0])
    print(c.execute("PRAGMA cipher_version").fetchone()[0])
except Exception as e:
    print("FAILED", type(e).__name__, e)
"#;
    let db = v.vault_dir().join("vault.db");
    let run = |key: &str| {
        let o = std::process::Command::new(python())
            .args(["-c", probe])
            .arg(&db)
            .arg(key)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "python sqlcipher3 missing? {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    let good = run(master);
    assert!(good.starts_with("api\n4."), "{good}");
    let wrong = run(&"00".repeat(32));
    assert!(wrong.starts_with("FAILED"), "{wrong}");
}

#[test]
fn the_journal_records_init_unlock_lock_and_credential_changes() {
    let mut v = TestVault::init("journal");
    v.add_bearer("api", "api.example.com", "DECOY_journal_1");
    v.run_pp(
        &["edit", "api", "--secret-stdin"],
        Some("DECOY_journal_2\n"),
    )
    .ok();
    v.run_pp(&["rm", "api"], None).ok();
    v.run(&["lock"], None).ok();
    v.run(
        &["unlock", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    let vault = v.open_db();
    let rows: Vec<(i64, String, String)> = vault
        .store
        .conn()
        .prepare("SELECT seq, kind, body FROM audit ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let kinds: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "vault.init",
            "approval.pin_set",
            "vault.unlock",
            "credential.add",
            "credential.edit",
            "credential.rm",
            "vault.lock",
            "vault.unlock"
        ]
    );
    assert!(rows.iter().enumerate().all(|(i, r)| r.0 == i as i64 + 1));
    for (_, _, body) in &rows {
        assert!(!body.contains("DECOY"), "{body}");
    }
}

#[test]
fn ssh_key_files_plain_and_encrypted_are_stored_decrypted_inside_the_vault() {
    let mut v = TestVault::init("sshkey");
    let d = v.dir.path().to_owned();
    for (name, pass) in [("plain", ""), ("locked", "key-pass-DECOY-83")] {
        let st = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-C", "", "-N", pass, "-f"])
            .arg(d.join(name))
            .status()
            .expect("ssh-keygen (apt-get install openssh-client)");
        assert!(st.success());
    }
    let plain = d.join("plain").display().to_string();
    v.run_pp(
        &[
            "add",
            "ssh",
            "k1",
            "--host",
            "127.0.0.1",
            "--user",
            "u",
            "--key-file",
            &plain,
            "--host-key",
            &host_key(),
        ],
        None,
    )
    .ok();
    let locked = d.join("locked").display().to_string();
    // No terminal for the key's passphrase: refused, nothing added.
    v.run_pp(
        &[
            "add",
            "ssh",
            "k2",
            "--host",
            "127.0.0.1",
            "--user",
            "u",
            "--key-file",
            &locked,
            "--host-key",
            &host_key(),
        ],
        None,
    )
    .code(2);
    let r = v.run_tty(
        &[
            "add",
            "ssh",
            "k2",
            "--host",
            "127.0.0.1",
            "--user",
            "u",
            "--key-file",
            &locked,
            "--host-key",
            &host_key(),
        ],
        &[
            ("passphrase of", "key-pass-DECOY-83\n"),
            ("Vault passphrase", &format!("{PASSPHRASE}\n")),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    let list = v.run(&["list", "--json"], None).ok();
    let creds: Vec<Value> = serde_json::from_str(list.stdout.trim()).unwrap();
    assert_eq!(creds.len(), 2);
    let fp = std::process::Command::new("ssh-keygen")
        .arg("-lf")
        .arg(d.join("locked.pub"))
        .output()
        .unwrap();
    let fp = String::from_utf8(fp.stdout).unwrap();
    let k2 = creds.iter().find(|c| c["name"] == "k2").unwrap();
    assert_eq!(
        k2["target"]["auth"]["fingerprint"].as_str().unwrap(),
        fp.split_whitespace().nth(1).unwrap()
    );
    let private = std::fs::read_to_string(d.join("plain")).unwrap();
    let body: String = private
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    for f in files_under(&v.vault_dir()) {
        let bytes = std::fs::read(&f).unwrap();
        assert_no_leak(&f.display().to_string(), &bytes, &body[..40]);
        assert_no_leak(&f.display().to_string(), &bytes, "key-pass-DECOY-83");
    }
    assert_no_leak(
        "output",
        v.transcript.join("\n").as_bytes(),
        "key-pass-DECOY-83",
    );
}

#[test]
fn fetch_host_key_reads_a_real_sshd_and_asks_before_pinning() {
    let sshd = sshd::Sshd::start("");
    let mut v = TestVault::init("fetch");
    let port = sshd.port.to_string();
    let args = [
        "add",
        "ssh",
        "box",
        "--host",
        "127.0.0.1",
        "--port",
        &port,
        "--user",
        "root",
        "--password-stdin",
        "--fetch-host-key",
    ];
    // Declined: nothing added.
    let mut tty_args: Vec<&str> = args.to_vec();
    tty_args[9] = "--key-file";
    let keyfile = v.dir.path().join("id");
    std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&keyfile)
        .status()
        .unwrap();
    let keyfile = keyfile.display().to_string();
    tty_args.insert(10, &keyfile);
    let r = v.run_tty(&tty_args, &[("trust this key", "n\n")]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stdout.contains(&sshd.host_key_fingerprint),
        "{}",
        r.stdout
    );
    let r = v.run_tty(
        &tty_args,
        &[
            ("trust this key", "y\n"),
            ("Vault passphrase", &format!("{PASSPHRASE}\n")),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    let list = v.run(&["list", "--json"], None).ok();
    let creds: Vec<Value> = serde_json::from_str(list.stdout.trim()).unwrap();
    assert_eq!(
        creds[0]["target"]["host_key"],
        sshd.host_key_fingerprint.as_str()
    );
    // Without a terminal it cannot be confirmed, so it is refused.
    let r = v.run(&args, Some("pw\n")).code(1);
    assert!(r.stderr.contains("--host-key"), "{}", r.stderr);
}

/// The test suite writes its key files at a low scrypt work factor (`VAULT_TEST_KDF_LOG_N`,
/// set by `.ci/tests`): a debug build honours it, and the shipped build must not. `.ci/run` runs
/// this again with `VAULT_TEST_BIN` at the release build, where the key file must carry age's
/// own measured factor (about a second here; 2^16 is a few tens of ms on any machine since 2010).
#[test]
fn the_test_work_factor_is_a_debug_build_knob_the_shipped_binary_ignores() {
    let mut v = TestVault::empty("kdf");
    let mut c = v.command(&["init", "--passphrase-stdin"]);
    c.env("VAULT_TEST_KDF_LOG_N", "10");
    v.run_command(&mut c, Some(&format!("{PASSPHRASE}\n"))).ok();
    let file = std::fs::read(v.vault_dir().join("vault.key.age")).unwrap();
    let stanza = file.split(|&b| b == b'\n').nth(1).unwrap();
    let stanza = String::from_utf8_lossy(stanza);
    let log_n: u8 = stanza
        .strip_prefix("-> scrypt ")
        .and_then(|r| r.split(' ').nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no scrypt stanza: {stanza}"));
    let shipped = std::path::Path::new(bin())
        .components()
        .any(|c| c.as_os_str() == "release");
    if shipped {
        assert!(
            log_n >= 16,
            "the release build took the test work factor: 2^{log_n}"
        );
    } else {
        assert_eq!(log_n, 10, "a debug build ignored VAULT_TEST_KDF_LOG_N");
    }
}
