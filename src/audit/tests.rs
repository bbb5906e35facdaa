//! Unit tests of the journal: appending, action-state checks, rejections, projections,
//! anchors and export. The seeded property tests of verification are in `proptests.rs`.
use super::proptests::{chain, read_rows, Rng};
use super::*;
use crate::store::Store;

/// `verify_store` and the parallel verifier (two readers, two rows per chunk, so every boundary
/// case occurs) on the same store: the verdicts must be equal. Returns it.
pub(super) fn verify_both(
    s: &Store,
    vault_id: &str,
    anchors: &[Anchor],
) -> Result<Report, VerifyError> {
    let one = verify_store(s.conn(), vault_id, anchors, None)?;
    for chunk in [1, 2, 5] {
        let many = verify_store_with(s, vault_id, anchors, None, 2, chunk)?;
        assert_eq!(
            many, one,
            "the parallel verdict (chunks of {chunk}) differs"
        );
    }
    Ok(one)
}

pub(super) fn store(tag: &str) -> Store {
    crate::store::test_store(&format!("audit-{tag}"), "vlt_test")
}

#[test]
fn rows_chain_from_the_genesis_of_the_vault_id() {
    let mut s = store("chain");
    let tx = s.write().unwrap();
    let a = append_row(&tx, "vault.init", None, None, &json!({"b": 1, "a": "x"})).unwrap();
    let b = append_row(&tx, "credential.add", Some("ses_1"), None, &json!({})).unwrap();
    tx.commit().unwrap();
    assert_eq!((a.seq, b.seq), (1, 2));
    #[allow(clippy::type_complexity)]
    let rows: Vec<(
        i64,
        String,
        String,
        Option<String>,
        String,
        Vec<u8>,
        Vec<u8>,
    )> = s
        .conn()
        .prepare("SELECT seq, ts, kind, session_id, body, prev, hash FROM audit ORDER BY seq")
        .unwrap()
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows[0].4, r#"{"a":"x","b":1}"#);
    let mut prev = genesis("vlt_test");
    for (seq, ts, kind, session, body, stored_prev, hash) in rows {
        assert_eq!(stored_prev, prev);
        let body: Value = serde_json::from_str(&body).unwrap();
        let row = canonical_row(seq, &ts, &kind, session.as_deref(), None, &body);
        assert_eq!(hash, row_hash(&prev, &row));
        prev = hash.try_into().unwrap();
    }
}

#[test]
fn a_rolled_back_transaction_leaves_no_row() {
    let mut s = store("rollback");
    {
        let tx = s.write().unwrap();
        append_row(&tx, "x", None, None, &json!({})).unwrap();
    }
    let n: i64 = s
        .conn()
        .query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
}

#[test]
fn genesis_depends_on_the_vault() {
    assert_ne!(genesis("a"), genesis("b"));
}

#[test]
fn action_states_must_equal_their_last_journal_transition() {
    let mut s = store("actions");
    // The real actions table (migration 0002), with only what this check reads made meaningful.
    let insert = |conn: &rusqlite::Connection, id: &str, state: &str| {
        conn.execute(
            "INSERT INTO actions (id, session_id, client, profile, tool, credential_id, credential_name, credential_version, \
             state, summary, normalized, action_hash, fingerprint, owner_pid, created_at, updated_at, expires_at) \
             VALUES (?1, 's', 'c', 'default', 'http_request', 'cred', 'api', 1, ?2, 'x', '{}', 'h', ?1, 1, 't', 't', 't')",
            [id, state],
        )
        .unwrap();
    };
    let tx = s.write().unwrap();
    append_row(
        &tx,
        "vault.init",
        None,
        None,
        &json!({"vault_id": "vlt_test"}),
    )
    .unwrap();
    for (act, state) in [
        ("act_a", "pending"),
        ("act_b", "pending"),
        ("act_a", "approved"),
        ("act_b", "denied"),
    ] {
        append_row(
            &tx,
            &format!("action.{state}"),
            Some("ses_1"),
            Some(act),
            &json!({"state": state}),
        )
        .unwrap();
    }
    insert(&tx, "act_a", "approved");
    insert(&tx, "act_b", "denied");
    tx.commit().unwrap();
    assert!(verify_both(&s, "vlt_test", &[]).unwrap().ok());

    s.conn()
        .execute(
            "UPDATE actions SET state = 'completed' WHERE id = 'act_a'",
            [],
        )
        .unwrap();
    let f = verify_both(&s, "vlt_test", &[]).unwrap().failure.unwrap();
    assert_eq!((f.seq, f.reason), (Some(4), Reason::ActionStateMismatch));
    assert!(f.detail.contains("act_a"), "{f:?}");

    s.conn()
        .execute(
            "UPDATE actions SET state = 'approved' WHERE id = 'act_a'",
            [],
        )
        .unwrap();
    insert(s.conn(), "act_ghost", "completed");
    let f = verify_both(&s, "vlt_test", &[]).unwrap().failure.unwrap();
    assert_eq!((f.seq, f.reason), (None, Reason::ActionStateMismatch));
    assert!(f.detail.contains("act_ghost"), "{f:?}");
}

#[test]
fn a_rejection_keeps_the_fingerprint_never_the_request() {
    let mut s = store("reject");
    let request = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"http_request","arguments":{"x":"REQUEST_BYTES_MARKER"}}}"#;
    let tx = s.write().unwrap();
    append_row(
        &tx,
        "vault.init",
        None,
        None,
        &json!({"vault_id": "vlt_test"}),
    )
    .unwrap();
    record_rejection(
        &tx,
        Some("ses_1"),
        -32602,
        "unknown field x",
        &blake3::hash(request).to_hex(),
        Some("http_request"),
    )
    .unwrap();
    tx.commit().unwrap();
    let rows = read_rows(&s);
    let r = &rows[1];
    assert_eq!(
        (r.kind.as_str(), r.session.as_deref(), r.action.as_deref()),
        ("call.rejected", Some("ses_1"), None)
    );
    let body: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(body["fingerprint"], blake3::hash(request).to_hex().as_str());
    assert_eq!(
        (body["code"].as_i64(), body["tool"].as_str()),
        (Some(-32602), Some("http_request"))
    );
    assert!(!r.body.contains("REQUEST_BYTES_MARKER"));
    assert!(verify_both(&s, "vlt_test", &[]).unwrap().ok());
}

#[test]
fn activity_and_sessions_are_projections_of_the_journal() {
    let mut s = store("activity");
    let tx = s.write().unwrap();
    append_row(
        &tx,
        "vault.init",
        None,
        None,
        &json!({"vault_id": "vlt_test"}),
    )
    .unwrap();
    append_row(&tx, "session.start", Some("ses_1"), None, &json!({
        "client": {"name": "claude-code", "version": "2.1.0"}, "parent": {"pid": 42, "exe": "/usr/bin/node"},
        "peer": {"pid": 43, "exe": "/usr/bin/vault"}, "profile": "default", "protocol_version": "2025-11-25"})).unwrap();
    let action = |state: &str| {
        json!({"state": state, "tool": "http_request", "credential": "api",
        "summary": "POST https://api.example.com/v1/items (credential api)", "hash": "ab"})
    };
    for state in ["pending", "approved", "dispatched", "completed"] {
        append_row(
            &tx,
            &format!("action.{state}"),
            Some("ses_1"),
            Some("act_1"),
            &action(state),
        )
        .unwrap();
    }
    append_row(
        &tx,
        "action.pending",
        Some("ses_1"),
        Some("act_2"),
        &action("pending"),
    )
    .unwrap();
    record_rejection(
        &tx,
        Some("ses_1"),
        -32602,
        "bad params",
        &blake3::hash(b"{}").to_hex(),
        None,
    )
    .unwrap();
    tx.commit().unwrap();

    let mut a = Activity::load(s.conn()).unwrap();
    assert_eq!(a.entries.len(), 3);
    let e = &a.entries[0];
    assert_eq!(
        (e.action_id.as_deref(), e.state.as_str(), e.tool.as_deref()),
        (Some("act_1"), "completed", Some("http_request"))
    );
    assert!(e.duration_ms.is_some_and(|d| d >= 0));
    assert_eq!(
        a.entries[1].duration_ms, None,
        "a pending action has no duration yet"
    );
    assert_eq!(
        (a.entries[2].state.as_str(), a.entries[2].code),
        ("rejected", Some(-32602))
    );
    assert_eq!(
        a.session_of(e).unwrap().client_name.as_deref(),
        Some("claude-code")
    );
    let ses = &a.sessions[0];
    assert_eq!((ses.parent_pid, ses.ended.as_deref()), (Some(42), None));
    let counts: Vec<(&str, u64)> = ses.counts.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(counts, [("completed", 1), ("pending", 1), ("rejected", 1)]);

    let tx = s.write().unwrap();
    append_row(
        &tx,
        "action.withdrawn",
        Some("ses_1"),
        Some("act_2"),
        &json!({"state": "withdrawn"}),
    )
    .unwrap();
    append_row(
        &tx,
        "session.end",
        Some("ses_1"),
        None,
        &json!({"reason": "eof", "withdrawn": 1, "suppressed_rejections": 0}),
    )
    .unwrap();
    tx.commit().unwrap();
    assert_eq!(a.update(s.conn()).unwrap(), vec![1]);
    assert_eq!(a.entries[1].state, "withdrawn");
    assert_eq!(
        a.entries[1].summary.as_deref(),
        Some("POST https://api.example.com/v1/items (credential api)")
    );
    assert_eq!(a.sessions[0].end_reason.as_deref(), Some("eof"));
    assert_eq!(a.sessions[0].counts.get("pending"), None);
}

#[test]
fn anchors_are_written_0600_every_n_rows_and_parsed_back() {
    let dir = std::env::temp_dir().join(format!("av-anchor-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let paths = crate::paths::VaultPaths::new(&dir);
    paths.create_dir().unwrap();
    let mut s = store("anchors");
    let tx = s.write().unwrap();
    append_row(
        &tx,
        "vault.init",
        None,
        None,
        &json!({"vault_id": "vlt_test"}),
    )
    .unwrap();
    for _ in 1..ANCHOR_EVERY - 1 {
        append_row(&tx, "x", None, None, &json!({})).unwrap();
    }
    tx.commit().unwrap();
    assert_eq!(
        maybe_anchor(&paths, s.conn()).unwrap(),
        None,
        "{} rows: not due yet",
        ANCHOR_EVERY - 1
    );
    assert!(!paths.anchors().exists());
    let tx = s.write().unwrap();
    let last = append_row(&tx, "x", None, None, &json!({})).unwrap();
    tx.commit().unwrap();
    let a = maybe_anchor(&paths, s.conn())
        .unwrap()
        .expect("due at ANCHOR_EVERY rows");
    assert_eq!((a.seq, a.hash), (last.seq, last.hash));
    assert_eq!(crate::paths::mode_of(&paths.anchors()), Some(0o600));
    assert_eq!(
        maybe_anchor(&paths, s.conn()).unwrap(),
        None,
        "already anchored"
    );
    write_anchor(&paths, 1, &[7; 32]).unwrap();
    assert_eq!(
        read_anchors(&paths).unwrap(),
        vec![
            a,
            Anchor {
                seq: 1,
                hash: [7; 32]
            }
        ]
    );
    assert_eq!(parse_anchor(&a.to_string()).unwrap(), a);
    assert!(parse_anchor("12").is_err() && parse_anchor("0:00").is_err());
    let f = verify_both(&s, "vlt_test", &read_anchors(&paths).unwrap())
        .unwrap()
        .failure
        .unwrap();
    assert_eq!((f.seq, f.reason), (Some(1), Reason::AnchorMismatch));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_export_verifies_without_the_key_and_hashes_as_the_database() {
    let mut rng = Rng(9);
    let s = chain("export", 25, &mut rng);
    let dir = std::env::temp_dir().join(format!("av-export-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("audit.jsonl");
    let exported = export(s.conn(), &file).unwrap();
    assert_eq!(exported.rows, 25);
    assert!(
        matches!(export(s.conn(), &file), Err(ExportError::Path(_))),
        "never overwrites"
    );
    let report = verify_file(&file, &[], None).unwrap();
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.head, exported.head);
    let first: Value = serde_json::from_str(
        std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let keys: Vec<&str> = first
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    // The first format's eight fields, and the format's version.
    assert_eq!(keys.len(), 9, "{keys:?}");
    assert_eq!(first["v"], 2);
    assert!(first["body"].is_object() && first["prev"].as_str().unwrap().len() == 64);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A journal of `rows` (kind, action, body) after a `vault.init` row; returns the verdict.
fn verdict_of(tag: &str, rows: &[(&str, Option<&str>, Value)]) -> Report {
    let mut s = store(tag);
    let tx = s.write().unwrap();
    append_row(
        &tx,
        "vault.init",
        None,
        None,
        &json!({"vault_id": "vlt_test"}),
    )
    .unwrap();
    for (kind, action, body) in rows {
        // An action row as the vault writes it, with the fields the test chose.
        let mut full =
            json!({"tool": "http_request", "credential": "api", "summary": "GET /", "hash": "ab"});
        if let Some(state) = kind.strip_prefix("action.") {
            full["state"] = json!(state);
        }
        for (k, v) in body.as_object().into_iter().flatten() {
            full[k] = v.clone();
        }
        append_row(&tx, kind, Some("ses_1"), *action, &full).unwrap();
    }
    tx.commit().unwrap();
    verify_both(&s, "vlt_test", &[]).unwrap()
}

#[test]
fn transitions_the_lifecycle_forbids_fail_verification() {
    let a = Some("act_a");
    let ok = [
        ("action.pending", a, json!({})),
        ("action.approved", a, json!({})),
        (
            "action.dispatched",
            a,
            json!({"basis": {"decision": "dec_1", "nonce": "n1"}}),
        ),
        ("action.completed", a, json!({})),
    ];
    assert!(verdict_of("life-ok", &ok).ok());
    // A completed action dispatched again (the reset-the-columns attack, journaled by hand).
    let mut again = ok.to_vec();
    again.push((
        "action.dispatched",
        a,
        json!({"basis": {"decision": "dec_1", "nonce": "n1"}}),
    ));
    let f = verdict_of("life-again", &again).failure.unwrap();
    assert_eq!(
        (f.reason, f.seq),
        (Reason::IllegalTransition, Some(6)),
        "{}",
        f.detail
    );
    // A second action dispatched on the first one's decision nonce.
    let b = Some("act_b");
    let mut spent = ok.to_vec();
    spent.extend([
        ("action.pending", b, json!({})),
        ("action.approved", b, json!({})),
        (
            "action.dispatched",
            b,
            json!({"basis": {"decision": "dec_1", "nonce": "n1"}}),
        ),
    ]);
    let f = verdict_of("life-spent", &spent).failure.unwrap();
    assert_eq!(
        (f.reason, f.seq),
        (Reason::IllegalTransition, Some(8)),
        "{}",
        f.detail
    );
    // An action that appears already dispatched, with no decision before it.
    let f = verdict_of("life-first", &[("action.dispatched", a, json!({}))])
        .failure
        .unwrap();
    assert_eq!(f.reason, Reason::IllegalTransition);
}

#[test]
fn a_pause_lifted_outside_the_vault_fails_verification() {
    let mut s = store("pause-meta");
    let tx = s.write().unwrap();
    append_row(
        &tx,
        "vault.init",
        None,
        None,
        &json!({"vault_id": "vlt_test"}),
    )
    .unwrap();
    crate::store::set_meta(&tx, "paused", "incident").unwrap();
    append_row(
        &tx,
        "vault.pause",
        None,
        None,
        &json!({"reason": "incident"}),
    )
    .unwrap();
    tx.commit().unwrap();
    assert!(verify_both(&s, "vlt_test", &[]).unwrap().ok());
    s.conn()
        .execute("DELETE FROM meta WHERE key = 'paused'", [])
        .unwrap();
    let f = verify_both(&s, "vlt_test", &[]).unwrap().failure.unwrap();
    assert_eq!(f.reason, Reason::PauseStateMismatch, "{}", f.detail);
}

#[test]
fn hex32_decodes_exactly_64_lowercase_hex_digits() {
    let mut rng = Rng(0x5eed_4e32);
    let digits = b"0123456789abcdefABCDEFgz/:@` \xc3";
    for _ in 0..20_000 {
        let len = [63, 64, 64, 64, 65][rng.below(5)];
        let mut s: Vec<u8> = (0..len)
            .map(|_| b"0123456789abcdef"[rng.below(16)])
            .collect();
        if rng.below(2) == 0 {
            let at = rng.below(len);
            s[at] = digits[rng.below(digits.len())];
        }
        let Ok(s) = String::from_utf8(s) else {
            continue;
        };
        let mut want = [0u8; 32];
        let lower = s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let want = (lower && hex::decode_to_slice(&s, &mut want).is_ok()).then_some(want);
        assert_eq!(hex32(&s), want, "{s}");
    }
    assert_eq!(hex32(&"ab".repeat(32)), Some([0xab; 32]));
    assert_eq!(hex32(&"AB".repeat(32)), None);
}
