//! vault.db's page format (HMAC-SHA256 page MACs) and the one-time conversion of a vault written
//! in the previous format (SQLCipher 4's defaults, HMAC-SHA512), through the real binary.
mod support;

use agent_vault::store::PAGE_FORMAT_PRAGMAS;
use rusqlite::{Connection, OpenFlags};
use std::path::Path;
use support::*;

const DECOY: &str = "DECOY_fmt_tok_3c8e19a0d7";

/// Whether `db` opens with `key` and the given settings (`""`: SQLCipher 4's defaults, what
/// vaults were written with before), counting its journal rows.
fn journal_rows(db: &Path, key: &str, settings: &str) -> Option<i64> {
    let c = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
    c.execute_batch("PRAGMA cipher_log_level = NONE;").ok()?;
    c.execute_batch(&format!("PRAGMA key = \"x'{key}'\"; {settings}"))
        .ok()?;
    c.query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
        .ok()
}

/// Rewrites `db` as a vault of the previous format would have it: the same rows, exported with
/// `sqlcipher_export` to a database attached with SQLCipher 4's default settings.
fn rewrite_in_previous_format(db: &Path, key: &str) {
    let old = db.with_file_name("previous-format.db");
    let c = Connection::open(db).unwrap();
    c.execute_batch(&format!("PRAGMA key = \"x'{key}'\"; {PAGE_FORMAT_PRAGMAS}"))
        .unwrap();
    let mode: String = c
        .query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        mode, "delete",
        "nothing else may have the test's vault.db open"
    );
    c.execute(
        "ATTACH DATABASE ?1 AS previous KEY ?2",
        [old.to_str().unwrap(), &format!("x'{key}'")],
    )
    .unwrap();
    c.query_row("SELECT sqlcipher_export('previous')", [], |_| Ok(()))
        .unwrap();
    c.execute_batch("DETACH DATABASE previous").unwrap();
    drop(c);
    std::fs::rename(&old, db).unwrap();
    // It is what an earlier binary wrote: SQLCipher's defaults open it, this binary's settings not.
    assert!(journal_rows(db, key, "").is_some());
    assert!(journal_rows(db, key, PAGE_FORMAT_PRAGMAS).is_none());
}

/// A second process running python `script` with `args`, holding what it took until its stdin
/// closes, and the first line it printed once it had taken it.
fn hold(script: &str, args: &[&str]) -> (std::process::Child, String) {
    let mut child = std::process::Command::new(python())
        .args(["-c", script])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    (child, line)
}

fn vault_with_history(tag: &str) -> (TestVault, String, i64) {
    let mut v = TestVault::init(tag);
    v.add_bearer("api", "api.example.com", DECOY);
    let key = v.master_hex();
    v.run(&["lock"], None).ok();
    let db = v.vault_dir().join("vault.db");
    let rows = journal_rows(&db, &key, PAGE_FORMAT_PRAGMAS).expect("a new vault is in this format");
    assert!(
        journal_rows(&db, &key, "").is_none(),
        "a new vault.db must not open with SQLCipher's default page MAC"
    );
    rewrite_in_previous_format(&db, &key);
    (v, key, rows)
}

#[test]
fn a_vault_of_the_previous_format_is_converted_once_and_keeps_every_row() {
    let (mut v, key, rows) = vault_with_history("fmt-convert");
    let db = v.vault_dir().join("vault.db");

    // What a conversion interrupted before its rename leaves: a half-written copy beside it.
    let stale = db.with_file_name("vault.db.format-new");
    std::fs::write(&stale, vec![0x5a; 4096]).unwrap();

    // The first commands that open the store, two at once, convert it once, and both work.
    let pp = v.dir.path().join("passphrase");
    std::fs::write(&pp, format!("{PASSPHRASE}\n")).unwrap();
    let lists: Vec<_> = (0..2)
        .map(|_| {
            v.command(&["list", "--json"])
                .env("VAULT_PASSPHRASE_FILE", &pp)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in lists {
        let out = child.wait_with_output().unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{stderr}");
        assert!(stdout.contains("\"api\""), "{stdout}");
        v.transcript
            .extend([stdout.into_owned(), stderr.into_owned()]);
    }
    assert!(
        journal_rows(&db, &key, "").is_none(),
        "converted: SQLCipher's defaults no longer open it"
    );
    let after = journal_rows(&db, &key, PAGE_FORMAT_PRAGMAS).expect("now in this format");
    assert!(
        after >= rows,
        "journal rows {after} < {rows} before the conversion"
    );
    assert!(!stale.exists(), "the half-written copy is gone");
    assert_eq!(mode(&db) & 0o777, 0o600);

    // The chain, the credential and its secret came through intact.
    v.run(
        &["unlock", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    let verify = v.run(&["verify", "--json"], None).ok();
    assert!(
        verify.stdout.starts_with(r#"{"ok":true,"#),
        "{}",
        verify.stdout
    );
    let vault = v.open_db();
    let secret: Vec<u8> = vault
        .store
        .conn()
        .query_row(
            "SELECT secret FROM credentials WHERE name = 'api'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(secret, DECOY.as_bytes());
    drop(vault);
    v.run(&["lock"], None).ok();
    assert_no_leak("stdout and stderr", v.transcript.concat().as_bytes(), DECOY);
}

#[test]
fn a_previous_format_vault_another_process_holds_open_is_left_as_it_was() {
    let (mut v, key, rows) = vault_with_history("fmt-busy");
    let db = v.vault_dir().join("vault.db");
    // An agent of the previous version, still running: a second process (an independent
    // SQLCipher 4) with the file open in WAL mode, as that agent kept it.
    let holder = r#"
import sys, sqlcipher3
c = sqlcipher3.connect(sys.argv[1])
c.execute('PRAGMA key = "x\'%s\'"' % sys.argv[2])
c.execute('PRAGMA journal_mode = WAL')
print(c.execute('SELECT count(*) FROM audit').fetchone()[0], flush=True)
sys.stdin.read()
"#;
    let (mut child, line) = hold(holder, &[db.to_str().unwrap(), &key]);
    assert_eq!(
        line.trim(),
        rows.to_string(),
        "the holder reads the journal"
    );

    let refused = v.run_pp(&["list", "--json"], None);
    assert_ne!(refused.code, 0, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("previous page format") && refused.stderr.contains("vault lock"),
        "says why and what to do: {}",
        refused.stderr
    );
    assert!(
        refused.stdout.is_empty(),
        "nothing on stdout: {}",
        refused.stdout
    );
    assert_eq!(
        journal_rows(&db, &key, ""),
        Some(rows),
        "still the previous format, untouched"
    );
    assert!(!db.with_file_name("vault.db.format-new").exists());

    drop(child.stdin.take());
    child.wait().unwrap();
    let list = v.run_pp(&["list", "--json"], None).ok();
    assert!(list.stdout.contains("\"api\""), "{}", list.stdout);
    assert!(journal_rows(&db, &key, PAGE_FORMAT_PRAGMAS).is_some());
}

#[test]
fn a_process_holding_the_lock_of_a_previous_format_vault_gets_an_error_not_a_hang() {
    // The attacker, a second process of the same uid, takes the conversion's lock (an exclusive
    // flock of vault.db) and never lets go: the person's command must end, say why, and leave the
    // file as it was.
    let (v, key, rows) = vault_with_history("fmt-flock");
    let db = v.vault_dir().join("vault.db");
    let holder = r#"
import fcntl, sys
f = open(sys.argv[1], 'rb')
fcntl.flock(f, fcntl.LOCK_EX)
print('locked', flush=True)
sys.stdin.read()
"#;
    let (mut child, line) = hold(holder, &[db.to_str().unwrap()]);
    assert_eq!(line.trim(), "locked");

    let pp = v.dir.path().join("passphrase");
    std::fs::write(&pp, format!("{PASSPHRASE}\n")).unwrap();
    let run = run_limited(
        v.command(&["list", "--json"])
            .env("VAULT_PASSPHRASE_FILE", &pp),
        std::time::Duration::from_secs(40),
    )
    .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.is_some(),
        "still waiting after {:?}: a hang",
        run.wall
    );
    assert!(!run.status.unwrap().success(), "{stderr}");
    assert!(
        stderr.contains("previous page format") && stderr.contains("retry"),
        "says why and what to do: {stderr}"
    );
    assert!(run.stdout.is_empty());
    assert_eq!(journal_rows(&db, &key, ""), Some(rows), "left as it was");
    drop(child.stdin.take());
    child.wait().unwrap();
}
