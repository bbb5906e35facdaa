//! The tamper-evident journal through the real `vault` binary: verify (vault and export, no key),
//! export-audit, anchors, tampering by an attacker holding the key, concurrent appends from
//! several processes, a crash in the middle of appends, and the Activity / Sessions views.
mod support;

use agent_vault::audit;
use agent_vault::paths::VaultPaths;
use agent_vault::store::StoreError;
use agent_vault::vault::Vault;
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

/// Selects the child role of this test binary: `append:<vault dir>` or `forever:<vault dir>`.
const CHILD_ENV: &str = "AV_AUDIT_TEST_CHILD";

fn open(v: &TestVault) -> Vault {
    std::env::set_var("VAULT_KEYRING", "kernel");
    Vault::open(VaultPaths::new(v.vault_dir())).expect("open the test vault via the keyring")
}

/// Appends `n` rows (one transaction each) through the library, as the MCP server will.
fn append_rows(v: &TestVault, n: usize) {
    let mut vault = open(v);
    for i in 0..n {
        let tx = vault.store.write().unwrap();
        audit::append(&tx, "test.row", Some("ses_t"), None, &json!({"i": i})).unwrap();
        tx.commit().unwrap();
    }
}

fn verify_json(v: &mut TestVault, args: &[&str], want_code: i32) -> Value {
    let mut all = vec!["verify", "--json"];
    all.extend_from_slice(args);
    let run = v.run(&all, None).code(want_code);
    serde_json::from_str(run.stdout.trim()).unwrap()
}

/// `vault verify --file FILE --json` with no vault directory, no keyring and no key at all.
fn verify_file(file: &std::path::Path, extra: &[&str]) -> (i32, Value) {
    let nowhere = std::env::temp_dir().join(format!("av-no-vault-{}", std::process::id()));
    let out = Command::new(bin())
        .args(["verify", "--json", "--file"])
        .arg(file)
        .args(extra)
        .env("VAULT_DIR", &nowhere)
        .env("VAULT_KEYRING", "kernel")
        .output()
        .unwrap();
    assert!(
        !nowhere.exists(),
        "verify --file must not create a vault dir"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap(), v)
}

#[test]
fn verify_prints_the_head_and_an_export_verifies_with_no_vault_at_all() {
    let mut v = TestVault::init("verify");
    append_rows(&v, 20);
    let head = {
        let vault = open(&v);
        let (seq, hash): (i64, Vec<u8>) = vault
            .store
            .conn()
            .query_row(
                "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        (seq, hex::encode(hash))
    };
    assert_eq!(head.0, 22, "init and unlock rows, then 20");
    let run = v.run(&["verify", "--json"], None).ok();
    assert_eq!(
        run.stdout.trim(),
        format!(
            r#"{{"ok":true,"rows":22,"head":{{"seq":22,"hash":"{}"}},"first_bad_seq":null,"reason":null}}"#,
            head.1
        )
    );
    let human = v.run(&["verify"], None).ok();
    assert!(
        human
            .stdout
            .contains(&format!("head: seq 22 hash {}", head.1)),
        "{}",
        human.stdout
    );

    let file = v.dir.path().join("audit.jsonl");
    v.run(&["export-audit", file.to_str().unwrap()], None).ok();
    assert_eq!(mode(&file), 0o600);
    let exported = std::fs::read(&file).unwrap();
    let again = v
        .run(&["export-audit", file.to_str().unwrap()], None)
        .code(1);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
    assert_eq!(
        std::fs::read(&file).unwrap(),
        exported,
        "an export is never overwritten"
    );
    let line: Value =
        serde_json::from_slice(exported.split(|b| *b == b'\n').nth(2).unwrap()).unwrap();
    for key in [
        "seq", "ts", "kind", "session", "action", "body", "prev", "hash",
    ] {
        assert!(line.get(key).is_some(), "export line lacks {key}: {line}");
    }
    assert_eq!(
        (line["session"].as_str(), line["body"]["i"].as_i64()),
        (Some("ses_t"), Some(0))
    );

    let (code, report) = verify_file(&file, &["--anchor", &format!("22:{}", head.1)]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(
        (report["rows"].as_i64(), report["head"]["hash"].as_str()),
        (Some(22), Some(head.1.as_str()))
    );
}

#[test]
fn a_tampered_export_fails_verification_at_the_right_seq() {
    let mut v = TestVault::init("export-tamper");
    append_rows(&v, 18);
    let file = v.dir.path().join("audit.jsonl");
    v.run(&["export-audit", file.to_str().unwrap()], None).ok();
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 20);
    let anchor = {
        let l: Value = serde_json::from_str(lines[14]).unwrap();
        format!("15:{}", l["hash"].as_str().unwrap())
    };
    let flip = |l: &str| l.replacen(r#""i":4"#, r#""i":5"#, 1);
    // (what, tampered lines, extra args, first bad seq, reason)
    type Case<'a> = (&'a str, Vec<String>, Vec<&'a str>, i64, &'a str);
    let cases: Vec<Case> = vec![
        (
            "flipped byte",
            lines
                .iter()
                .enumerate()
                .map(|(i, l)| if i == 6 { flip(l) } else { l.to_string() })
                .collect(),
            vec![],
            7,
            "hash mismatch",
        ),
        (
            "deleted row",
            lines
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != 6)
                .map(|(_, l)| l.to_string())
                .collect(),
            vec![],
            7,
            "gap",
        ),
        (
            "duplicated row",
            {
                let mut d: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
                d.insert(7, lines[6].to_string());
                d
            },
            vec![],
            8,
            "duplicate",
        ),
        (
            "swapped rows",
            {
                let mut d: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
                d.swap(6, 7);
                d
            },
            vec![],
            7,
            "reordered",
        ),
        (
            "truncated below an anchor",
            lines[..10].iter().map(|l| l.to_string()).collect(),
            vec!["--anchor", anchor.as_str()],
            11,
            "truncated below anchor",
        ),
    ];
    for (what, tampered, extra, seq, reason) in cases {
        let path = v
            .dir
            .path()
            .join(format!("{}.jsonl", what.replace(' ', "-")));
        std::fs::write(&path, tampered.join("\n") + "\n").unwrap();
        let (code, report) = verify_file(&path, &extra);
        assert_eq!(code, 3, "{what}: {report}");
        assert_eq!(report["ok"], false, "{what}");
        assert_eq!(
            report["first_bad_seq"].as_i64(),
            Some(seq),
            "{what}: {report}"
        );
        assert!(
            report["reason"].as_str().unwrap().starts_with(reason),
            "{what}: {report}"
        );
    }
    // The untouched export still verifies: the failures above come from the tampering.
    assert_eq!(verify_file(&file, &["--anchor", &anchor]).0, 0);
}

#[test]
fn an_update_by_someone_with_the_key_is_caught() {
    let mut v = TestVault::init("update");
    append_rows(&v, 8);
    {
        let vault = open(&v);
        let c = vault.store.conn();
        assert!(
            c.execute("UPDATE audit SET body = '{\"i\":99}' WHERE seq = 5", [])
                .is_err(),
            "the trigger refuses"
        );
        c.execute_batch(
            "DROP TRIGGER audit_no_update; UPDATE audit SET body = '{\"i\":99}' WHERE seq = 5;",
        )
        .unwrap();
    }
    let report = verify_json(&mut v, &[], 3);
    assert_eq!(
        (report["ok"].as_bool(), report["first_bad_seq"].as_i64()),
        (Some(false), Some(5))
    );
    assert!(
        report["reason"]
            .as_str()
            .unwrap()
            .starts_with("hash mismatch"),
        "{report}"
    );
    assert_eq!(
        (report["rows"].as_i64(), report["head"]["seq"].as_i64()),
        (Some(4), Some(4))
    );
    let human = v.run(&["verify"], None).code(3);
    assert!(
        human.stdout.contains("FAILED at seq 5: hash mismatch"),
        "{}",
        human.stdout
    );
}

#[test]
fn anchors_catch_a_history_cut_off_with_the_key() {
    let mut v = TestVault::init("anchors");
    append_rows(&v, 12);
    {
        let vault = open(&v);
        assert_eq!(
            audit::maybe_anchor(&vault.paths, vault.store.conn()).unwrap(),
            None,
            "14 rows: not due"
        );
        let (seq, hash): (i64, Vec<u8>) = vault
            .store
            .conn()
            .query_row(
                "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        audit::write_anchor(&vault.paths, seq, &hash.try_into().unwrap()).unwrap();
        assert_eq!(mode(&vault.paths.anchors()), 0o600);
        vault
            .store
            .conn()
            .execute_batch("DROP TRIGGER audit_no_delete; DELETE FROM audit WHERE seq > 10;")
            .unwrap();
    }
    let report = verify_json(&mut v, &[], 3);
    assert_eq!(report["first_bad_seq"].as_i64(), Some(11), "{report}");
    assert!(
        report["reason"]
            .as_str()
            .unwrap()
            .starts_with("truncated below anchor"),
        "{report}"
    );
    // Without the anchor file the cut is invisible: the anchor is what caught it.
    std::fs::remove_file(v.vault_dir().join("anchors.jsonl")).unwrap();
    assert_eq!(verify_json(&mut v, &[], 0)["rows"].as_i64(), Some(10));
}

/// The child roles of this binary (see `CHILD_ENV`); returns true when this process is a child.
fn run_child_role() -> bool {
    let Ok(role) = std::env::var(CHILD_ENV) else {
        return false;
    };
    let (mode, dir) = role.split_once(':').unwrap();
    let mut vault = Vault::open(VaultPaths::new(dir)).expect("child opens the vault");
    let pid = std::process::id();
    let rows = if mode == "append" { 1000 } else { usize::MAX };
    let deadline = Instant::now() + Duration::from_secs(50);
    for i in 0..rows {
        // SQLite's busy handler is not fair: with slow fsyncs (a busy disk) one writer can wait
        // out the whole busy timeout while the others take turns. `Busy` is transient; a writer
        // tries again.
        let tx = loop {
            match vault.store.write() {
                Ok(tx) => break tx,
                Err(StoreError::Busy) if Instant::now() < deadline => continue,
                Err(e) => panic!("child {pid} cannot begin a write: {e}"),
            }
        };
        audit::append(
            &tx,
            "test.concurrent",
            None,
            None,
            &json!({"pid": pid, "i": i}),
        )
        .unwrap();
        if mode == "forever" && i % 3 == 0 {
            // Some transactions hold several rows, so a kill can land in the middle of one.
            audit::append(
                &tx,
                "test.concurrent",
                None,
                None,
                &json!({"pid": pid, "i": i, "extra": true}),
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }
    true
}

/// The two multi-process tests run one at a time: together they would measure the disk, not us.
static MULTI_PROCESS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn spawn_child(test: &str, role: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, role)
        .env("VAULT_KEYRING", "kernel")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn eight_processes_appending_at_once_make_one_chain() {
    if run_child_role() {
        return;
    }
    let _serial = MULTI_PROCESS.lock().unwrap_or_else(|e| e.into_inner());
    let mut v = TestVault::init("concurrent");
    let role = format!("append:{}", v.vault_dir().display());
    let started = Instant::now();
    let children: Vec<_> = (0..8)
        .map(|_| spawn_child("eight_processes_appending_at_once_make_one_chain", &role))
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "child failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    eprintln!("8 x 1000 concurrent appends took {:?}", started.elapsed());
    let report = verify_json(&mut v, &[], 0);
    assert_eq!(report["rows"].as_i64(), Some(8002), "{report}");
    let vault = open(&v);
    let c = vault.store.conn();
    let per_pid: Vec<i64> = c
        .prepare("SELECT count(*) FROM audit WHERE kind = 'test.concurrent' GROUP BY json_extract(body, '$.pid')")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        per_pid,
        vec![1000; 8],
        "every process's appends are there, once"
    );
    let (rows, distinct_prev, max_seq): (i64, i64, i64) = c
        .query_row(
            "SELECT count(*), count(DISTINCT prev), max(seq) FROM audit",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(
        (rows, distinct_prev, max_seq),
        (8002, 8002, 8002),
        "no fork, no gap"
    );
}

#[test]
fn a_process_killed_in_the_middle_of_appends_leaves_a_chain_that_verifies() {
    if run_child_role() {
        return;
    }
    let _serial = MULTI_PROCESS.lock().unwrap_or_else(|e| e.into_inner());
    let mut v = TestVault::init("kill9");
    let mut child = spawn_child(
        "a_process_killed_in_the_middle_of_appends_leaves_a_chain_that_verifies",
        &format!("forever:{}", v.vault_dir().display()),
    );
    // Wait until the child is appending, then kill -9 it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let vault = open(&v);
    loop {
        let n: i64 = vault
            .store
            .conn()
            .query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
            .unwrap();
        if n > 200 {
            break;
        }
        assert!(Instant::now() < deadline, "the child never appended");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(vault);
    std::thread::sleep(Duration::from_millis(50));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let report = verify_json(&mut v, &[], 0);
    assert!(report["rows"].as_i64().unwrap() > 200, "{report}");
    append_rows(&v, 1);
    verify_json(&mut v, &[], 0);
}

#[test]
fn log_and_sessions_show_what_each_agent_did() {
    let mut v = TestVault::init("activity");
    {
        let mut vault = open(&v);
        let tx = vault.store.write().unwrap();
        for (ses, client) in [("ses_a", "claude-code"), ("ses_b", "cursor")] {
            audit::append(&tx, "session.start", Some(ses), None, &json!({
                "client": {"name": client, "version": "1.0"}, "parent": {"pid": 4242, "exe": "/usr/bin/node"},
                "profile": "default", "protocol_version": "2025-11-25"})).unwrap();
        }
        let body = |s: &str| json!({"state": s, "tool": "http_request", "credential": "api", "summary": "POST https://api.example.com/v1/items (credential api)"});
        for s in ["pending", "approved", "dispatched", "completed"] {
            audit::append(
                &tx,
                &format!("action.{s}"),
                Some("ses_a"),
                Some("act_1"),
                &body(s),
            )
            .unwrap();
        }
        audit::append(
            &tx,
            "action.pending",
            Some("ses_b"),
            Some("act_2"),
            &body("pending"),
        )
        .unwrap();
        audit::append(
            &tx,
            "action.denied",
            Some("ses_b"),
            Some("act_2"),
            &body("denied"),
        )
        .unwrap();
        audit::record_rejection(
            &tx,
            Some("ses_b"),
            -32602,
            "unknown field \"hdrs\"",
            b"{\"raw\":1}",
            Some("http_request"),
        )
        .unwrap();
        audit::append(
            &tx,
            "session.end",
            Some("ses_a"),
            None,
            &json!({"reason": "eof"}),
        )
        .unwrap();
        tx.commit().unwrap();
    }
    let out = v.run(&["log", "--json"], None).ok();
    let entries: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(entries.len(), 3, "{}", out.stdout);
    assert_eq!(entries[0]["state"], "completed");
    assert_eq!(entries[0]["client"]["name"], "claude-code");
    assert_eq!(entries[0]["credential"], "api");
    assert!(entries[0]["duration_ms"].as_i64().is_some());
    assert_eq!(
        (
            entries[1]["state"].as_str(),
            entries[1]["client"]["name"].as_str()
        ),
        (Some("denied"), Some("cursor"))
    );
    assert_eq!(
        (entries[2]["state"].as_str(), entries[2]["code"].as_i64()),
        (Some("rejected"), Some(-32602))
    );

    let only_b = v.run(&["log", "--json", "--session", "ses_b"], None).ok();
    assert_eq!(only_b.stdout.lines().count(), 2);
    assert_eq!(
        v.run(&["log", "--json", "--since", "1h"], None)
            .ok()
            .stdout
            .lines()
            .count(),
        3
    );
    assert_eq!(
        v.run(&["log", "--json", "--since", "2999-01-01T00:00:00Z"], None)
            .ok()
            .stdout
            .lines()
            .count(),
        0
    );
    v.run(&["log", "--since", "yesterday"], None).code(1);
    let human = v.run(&["log"], None).ok();
    assert!(
        human
            .stdout
            .contains("POST https://api.example.com/v1/items")
            && human.stdout.contains("claude-code")
    );
    assert!(
        !human.stdout.contains('\x1b'),
        "no colour when stdout is not a terminal"
    );

    let sessions: Vec<Value> =
        serde_json::from_str(v.run(&["sessions", "--json"], None).ok().stdout.trim()).unwrap();
    assert_eq!(sessions.len(), 2);
    assert_eq!(
        sessions[0]["client"],
        json!({"name": "claude-code", "version": "1.0"})
    );
    assert_eq!(
        sessions[0]["parent"],
        json!({"pid": 4242, "exe": "/usr/bin/node"})
    );
    assert_eq!(
        (
            sessions[0]["end_reason"].as_str(),
            sessions[1]["ended"].as_str()
        ),
        (Some("eof"), None)
    );
    assert_eq!(sessions[0]["counts"], json!({"completed": 1}));
    assert_eq!(sessions[1]["counts"], json!({"denied": 1, "rejected": 1}));
    v.run(&["sessions"], None).ok();
}

#[test]
fn log_follow_prints_new_transitions_as_they_are_journaled() {
    let v = TestVault::init("follow");
    let mut child = v
        .command(&["log", "--follow", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    {
        let mut vault = open(&v);
        let t = vault.store.write().unwrap();
        audit::append(
            &t,
            "action.pending",
            Some("ses_f"),
            Some("act_f"),
            &json!({"state": "pending", "tool": "ssh_exec"}),
        )
        .unwrap();
        t.commit().unwrap();
    }
    let line = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("--follow printed the new action");
    let _ = child.kill();
    let _ = child.wait();
    let e: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        (
            e["action_id"].as_str(),
            e["state"].as_str(),
            e["tool"].as_str()
        ),
        (Some("act_f"), Some("pending"), Some("ssh_exec"))
    );
}
