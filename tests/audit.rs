//! The tamper-evident journal through the real `vault` binary: verify (vault and export, no key),
//! export-audit, anchors, tampering by an attacker holding the key, and the Activity / Sessions
//! views. Concurrency and crashes are in `audit_concurrency.rs`.
mod support;

use agent_vault::audit;
use agent_vault::wire::{journal, State};
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::journal::{append_rows, open, verify_json};
use support::*;

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
    let mut v = TestVault::init_without_pin("verify");
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
            r#"{{"ok":true,"rows":22,"head":{{"seq":22,"hash":"{}"}},"first_bad_seq":null,"reason":null,"held":true,"signatures":0,"signed_from":null,"unchecked":null}}"#,
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

    let key = support::journal::approver_key(&mut v);
    let anchor = format!("22:{}", head.1);
    let (code, report) = verify_file(&file, &["--anchor", &anchor, "--approver-key", &key]);
    assert_eq!(code, 0, "{report}");
    // Without the approver's key the chain is intact, but the export is not held to anyone.
    let (code, report) = verify_file(&file, &["--anchor", &anchor]);
    assert_eq!(
        (code, report["ok"].as_bool(), report["held"].as_bool()),
        (5, Some(true), Some(false)),
        "{report}"
    );
    assert_eq!(
        (report["rows"].as_i64(), report["head"]["hash"].as_str()),
        (Some(22), Some(head.1.as_str()))
    );
}

#[test]
fn init_prints_the_approver_key_once_and_show_key_prints_it_again() {
    let mut v = TestVault::empty("show-key");
    let init = v
        .run(
            &["init", "--passphrase-stdin"],
            Some(&format!("{PASSPHRASE}\n")),
        )
        .ok();
    let row1: Value = {
        let vault = open(&v);
        let body: String = vault
            .store
            .conn()
            .query_row("SELECT body FROM audit WHERE seq = 1", [], |r| r.get(0))
            .unwrap();
        serde_json::from_str(&body).unwrap()
    };
    let hex = row1["approver_public_key"].as_str().unwrap().to_owned();
    let show = v
        .run(
            &["approver", "show-key", "--passphrase-stdin"],
            Some(&format!("{PASSPHRASE}\n")),
        )
        .ok();
    let lines: Vec<&str> = show.stdout.lines().collect();
    assert_eq!(
        lines.len(),
        2,
        "stdout holds the key, nothing else: {}",
        show.stdout
    );
    assert_eq!(lines[0], hex);
    assert!(
        lines[1].starts_with("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI")
            && lines[1].ends_with(" agent-vault-approver"),
        "{}",
        lines[1]
    );
    assert!(
        show.stderr.contains("Keep a copy off this machine"),
        "the advice goes to stderr: {}",
        show.stderr
    );
    // `vault init` printed the same two lines once, and said to keep them elsewhere.
    assert_eq!(init.stdout.matches(&hex).count(), 1, "{}", init.stdout);
    assert!(init.stdout.contains(lines[1]), "{}", init.stdout);
    assert!(
        init.stderr.contains("Keep a copy off this machine"),
        "{}",
        init.stderr
    );
    // Any ssh tool reads the line as an ed25519 key.
    let file = v.dir.path().join("approver.pub");
    std::fs::write(&file, format!("{}\n", lines[1])).unwrap();
    if let Ok(out) = Command::new("ssh-keygen")
        .arg("-l")
        .arg("-f")
        .arg(&file)
        .output()
    {
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("agent-vault-approver (ED25519)"), "{said}");
    }
    let json: Value = serde_json::from_str(
        v.run(
            &["approver", "show-key", "--json", "--passphrase-stdin"],
            Some(&format!("{PASSPHRASE}\n")),
        )
        .ok()
        .stdout
        .trim(),
    )
    .unwrap();
    assert_eq!(
        (json["hex"].as_str(), json["ssh"].as_str()),
        (Some(hex.as_str()), Some(lines[1]))
    );
    let wrong = v.run(
        &["approver", "show-key", "--passphrase-stdin"],
        Some("nope\n"),
    );
    assert_ne!(wrong.code, 0);
    assert!(wrong.stdout.is_empty(), "{}", wrong.stdout);
}

#[test]
fn a_tampered_export_fails_verification_at_the_right_seq() {
    let mut v = TestVault::init_without_pin("export-tamper");
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
    let key = support::journal::approver_key(&mut v);
    assert_eq!(
        verify_file(&file, &["--anchor", &anchor, "--approver-key", &key]).0,
        0
    );
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
    let mut v = TestVault::init_without_pin("anchors");
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
    // The person is shown the last anchored head, its time, and why to keep it elsewhere.
    let human = v.run(&["verify"], None).code(3);
    assert!(
        human.stdout.contains("Last anchored head: seq 14 at 20")
            && human
                .stdout
                .contains("only against a head kept off this machine"),
        "{}",
        human.stdout
    );
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

#[test]
fn unlock_shows_the_last_anchored_head() {
    let mut v = TestVault::init("anchor-unlock");
    // A session's end anchors the head.
    let mut p = support::mcp::McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    p.finish(Duration::from_secs(10));
    let line = std::fs::read_to_string(v.vault_dir().join("anchors.jsonl")).unwrap();
    let last: Value = serde_json::from_str(line.lines().last().unwrap()).unwrap();
    let unlock = v
        .run(
            &["unlock", "--restart", "--passphrase-stdin"],
            Some(&format!("{PASSPHRASE}\n")),
        )
        .ok();
    let want = format!(
        "Last anchored head: seq {} at {} ({}:{})",
        last["seq"],
        support::local_time(last["ts"].as_str().unwrap()),
        last["seq"],
        last["hash"].as_str().unwrap()
    );
    assert!(unlock.stdout.contains(&want), "{want}\n{}", unlock.stdout);
}

#[test]
fn log_and_sessions_show_what_each_agent_did() {
    let mut v = TestVault::init("activity");
    {
        let mut vault = open(&v);
        let tx = vault.store.write().unwrap();
        for (ses, client) in [("ses_a", "claude-code"), ("ses_b", "cursor")] {
            let start = journal::SessionStart {
                client: journal::ClientLabel {
                    name: client.into(),
                    version: "1.0".into(),
                },
                peer: journal::Process {
                    pid: Some(4243),
                    exe: Some("/usr/bin/vault".into()),
                },
                parent: journal::Process {
                    pid: Some(4242),
                    exe: Some("/usr/bin/node".into()),
                },
                profile: "default".into(),
                protocol_version: "2025-11-25".into(),
                contained: false,
            };
            audit::append(&tx, Some(ses), None, &start).unwrap();
        }
        let body = |state: State| journal::ActionRow {
            state,
            tool: "http_request".into(),
            credential: "api".into(),
            summary: "POST https://api.example.com/v1/items (credential api)".into(),
            hash: "ab".repeat(32),
            reason: None,
            basis: None,
            method: None,
            touch: None,
            signed: None,
        };
        for s in [
            State::Pending,
            State::Approved,
            State::Dispatched,
            State::Completed,
        ] {
            audit::append(&tx, Some("ses_a"), Some("act_1"), &body(s)).unwrap();
        }
        for s in [State::Pending, State::Denied] {
            audit::append(&tx, Some("ses_b"), Some("act_2"), &body(s)).unwrap();
        }
        audit::record_rejection(
            &tx,
            Some("ses_b"),
            -32602,
            "unknown field \"hdrs\"",
            &blake3::hash(b"{\"raw\":1}").to_hex(),
            Some("http_request"),
        )
        .unwrap();
        let end = journal::SessionEnd {
            reason: "eof".into(),
            withdrawn: 0,
            suppressed_rejections: 0,
        };
        audit::append(&tx, Some("ses_a"), None, &end).unwrap();
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
    // A person reads local time with its offset; `--json` keeps RFC 3339 UTC.
    let json_first: Value = serde_json::from_str(
        v.run(&["log", "--json"], None)
            .ok()
            .stdout
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let utc = json_first["time"].as_str().unwrap();
    assert!(utc.ends_with('Z'), "{utc}");
    assert!(
        human
            .stdout
            .lines()
            .nth(1)
            .unwrap()
            .starts_with(&support::local_time(utc)),
        "{}",
        human.stdout
    );

    let sessions: Vec<Value> =
        serde_json::from_str(v.run(&["sessions", "--json"], None).ok().stdout.trim()).unwrap();
    assert_eq!(sessions.len(), 2);
    let sessions_text = v.run(&["sessions"], None).ok().stdout;
    let started = support::local_time(sessions[0]["started"].as_str().unwrap());
    assert!(
        sessions_text.contains(&started),
        "{started}\n{sessions_text}"
    );
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
    let mut v = TestVault::init("follow");
    v.add_bearer("api", "https://127.0.0.1:9", "follow-decoy");
    let mut mcp = support::mcp::McpProc::spawn(v.command(&["mcp"]));
    mcp.initialize();
    let ask = |mcp: &mut support::mcp::McpProc, id: i64, path: &str| {
        let r = mcp.call(
            id,
            "http_request",
            json!({"credential": "api", "method": "GET", "url": format!("https://127.0.0.1:9{path}"), "wait_s": 0}),
        );
        r["result"]["structuredContent"]["action_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let first = ask(&mut mcp, 1, "/first");
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
    let line = |rx: &std::sync::mpsc::Receiver<String>| -> Value {
        serde_json::from_str(&rx.recv_timeout(Duration::from_secs(10)).expect("a line")).unwrap()
    };
    // The initial load holds the first action and nothing else; the second is asked only after
    // the load printed and went quiet, so its line can only come through following.
    assert_eq!(line(&rx)["action_id"].as_str(), Some(first.as_str()));
    assert!(
        rx.recv_timeout(Duration::from_millis(500)).is_err(),
        "the initial load printed more than the first action"
    );
    let second = ask(&mut mcp, 2, "/second");
    let e = line(&rx);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        (
            e["action_id"].as_str(),
            e["state"].as_str(),
            e["tool"].as_str()
        ),
        (Some(second.as_str()), Some("pending"), Some("http_request"))
    );
    mcp.finish(Duration::from_secs(10));
}
