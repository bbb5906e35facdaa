use super::*;
use crate::keys::MasterKey;
use crate::store::{set_meta, Store};

fn store(tag: &str) -> Store {
    let dir = std::env::temp_dir().join(format!("av-audit-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut s = Store::create(&dir.join("vault.db"), &MasterKey::generate()).unwrap();
    let tx = s.write().unwrap();
    set_meta(&tx, "vault_id", "vlt_test").unwrap();
    tx.commit().unwrap();
    s
}

#[test]
fn rows_chain_from_the_genesis_of_the_vault_id() {
    let mut s = store("chain");
    let tx = s.write().unwrap();
    let a = append(&tx, "vault.init", None, None, &json!({"b": 1, "a": "x"})).unwrap();
    let b = append(&tx, "credential.add", Some("ses_1"), None, &json!({})).unwrap();
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
        append(&tx, "x", None, None, &json!({})).unwrap();
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

/// A small deterministic PRNG (xorshift64*), so failures reproduce from the printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn text(&mut self) -> String {
        const CHARS: &[char] = &['a', 'Z', '0', ' ', '"', '\\', '\n', '\u{1}', 'é', '→', '/'];
        (0..self.below(12))
            .map(|_| CHARS[self.below(CHARS.len())])
            .collect()
    }
}

/// An owned journal row, as read from the database.
#[derive(Debug, Clone)]
struct Owned {
    seq: i64,
    ts: String,
    kind: String,
    session: Option<String>,
    action: Option<String>,
    body: String,
    prev: Vec<u8>,
    hash: Vec<u8>,
}

impl Owned {
    fn as_ref(&self) -> RowRef<'_> {
        RowRef {
            seq: self.seq,
            ts: &self.ts,
            kind: &self.kind,
            session: self.session.as_deref(),
            action: self.action.as_deref(),
            body: &self.body,
            prev: &self.prev,
            hash: &self.hash,
        }
    }
}

fn read_rows(s: &Store) -> Vec<Owned> {
    s.conn()
        .prepare(
            "SELECT seq, ts, kind, session_id, action_id, body, prev, hash FROM audit ORDER BY seq",
        )
        .unwrap()
        .query_map([], |r| {
            Ok(Owned {
                seq: r.get(0)?,
                ts: r.get(1)?,
                kind: r.get(2)?,
                session: r.get(3)?,
                action: r.get(4)?,
                body: r.get(5)?,
                prev: r.get(6)?,
                hash: r.get(7)?,
            })
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A store whose journal starts with `vault.init` and holds `n` rows with random contents.
fn chain(tag: &str, n: usize, rng: &mut Rng) -> Store {
    let mut s = store(tag);
    let tx = s.write().unwrap();
    append(
        &tx,
        "vault.init",
        None,
        None,
        &json!({"vault_id": "vlt_test"}),
    )
    .unwrap();
    for i in 1..n {
        let session = (rng.below(2) == 0).then(|| format!("ses_{}", rng.text()));
        let action = (rng.below(3) == 0).then(|| format!("act_{i}"));
        let body = json!({"n": i, "s": rng.text(), "nested": {"z": [1, rng.text()], "a": null}});
        let kind = format!("k.{}", rng.text());
        append(&tx, &kind, session.as_deref(), action.as_deref(), &body).unwrap();
    }
    tx.commit().unwrap();
    s
}

/// Flips one of the low `bits` bits of one byte (appends a byte to an empty field).
fn flip(bytes: &mut Vec<u8>, rng: &mut Rng, bits: usize) {
    if bytes.is_empty() {
        bytes.push(b'x');
        return;
    }
    let at = rng.below(bytes.len());
    if bits < 8 && bytes[at] >= 0x80 {
        bytes[at] = b'?';
    } else {
        bytes[at] ^= 1 << rng.below(bits);
    }
}

/// `flip` on text, kept UTF-8: ASCII bytes stay ASCII, a multi-byte character becomes `?`s.
fn flip_text(s: &str, rng: &mut Rng) -> String {
    let mut bytes = s.as_bytes().to_vec();
    flip(&mut bytes, rng, 7);
    match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).replace('\u{fffd}', "?"),
    }
}

fn verify_rows(rows: &[Owned], anchors: &[Anchor]) -> Report {
    let mut v = Verifier::new(Some("vlt_test"), anchors);
    for r in rows {
        if !v.push(&r.as_ref()) {
            break;
        }
    }
    v.finish().0
}

#[test]
fn the_fast_row_form_equals_the_canonical_form() {
    let mut rng = Rng(7);
    let mut buf = String::new();
    for seq in 1..300 {
        let (ts, kind, s, a) = (rng.text(), rng.text(), rng.text(), rng.text());
        let body = json!({"x": rng.text(), "b": [rng.text(), seq], "é": {"q": rng.text()}});
        let session = (seq % 2 == 0).then_some(s.as_str());
        let action = (seq % 3 == 0).then_some(a.as_str());
        let body_text = canonical::to_string(&body);
        let row = RowRef {
            seq,
            ts: &ts,
            kind: &kind,
            session,
            action,
            body: &body_text,
            prev: &[0; 32],
            hash: &[0; 32],
        };
        write_canonical_row(&mut buf, &row);
        assert_eq!(buf, canonical_row(seq, &ts, &kind, session, action, &body));
    }
}

#[test]
fn append_then_verify_always_passes() {
    let mut rng = Rng(0x5eed_0001);
    for round in 0..6 {
        let n = 1 + rng.below(60);
        let s = chain(&format!("pass{round}"), n, &mut rng);
        let report = verify_store(s.conn(), "vlt_test", &[]).unwrap();
        assert!(report.ok(), "round {round}, {n} rows: {report:?}");
        assert_eq!(report.rows, n as u64);
        let rows = read_rows(&s);
        let last = rows.last().unwrap();
        assert_eq!(report.head.unwrap().seq, last.seq);
        assert_eq!(report.head.unwrap().hash[..], last.hash[..]);
        // Every row's own head, kept as an anchor, is accepted.
        let anchors: Vec<Anchor> = rows
            .iter()
            .map(|r| Anchor {
                seq: r.seq,
                hash: r.hash.clone().try_into().unwrap(),
            })
            .collect();
        assert!(verify_store(s.conn(), "vlt_test", &anchors).unwrap().ok());
    }
}

#[test]
fn every_kind_of_tampering_is_caught_at_the_right_seq() {
    let seed = 0x7a3b_11c9;
    let mut rng = Rng(seed);
    let s = chain("tamper", 40, &mut rng);
    let rows = read_rows(&s);
    let n = rows.len();
    assert!(verify_rows(&rows, &[]).ok());
    for trial in 0..2000 {
        let mut t = rows.clone();
        let k = 1 + rng.below(n); // a seq, 1-based
        let i = k - 1;
        let mut anchors = Vec::new();
        let (want_seq, want): (usize, &[Reason]) = match rng.below(5) {
            0 => {
                // Flip one bit of one byte of one field (kept ASCII so the text stays UTF-8).
                let field = rng.below(7);
                let r = &mut t[i];
                match field {
                    0 => r.ts = flip_text(&r.ts, &mut rng),
                    1 => r.kind = flip_text(&r.kind, &mut rng),
                    2 => r.session = Some(flip_text(r.session.as_deref().unwrap_or(""), &mut rng)),
                    3 => r.action = Some(flip_text(r.action.as_deref().unwrap_or(""), &mut rng)),
                    4 => r.body = flip_text(&r.body, &mut rng),
                    5 => flip(&mut r.prev, &mut rng, 8),
                    _ => flip(&mut r.hash, &mut rng, 8),
                }
                let want: &[Reason] = match (k, field) {
                    (1, _) => &[Reason::BadGenesis, Reason::HashMismatch],
                    (_, 5) => &[Reason::PrevMismatch],
                    _ => &[Reason::HashMismatch],
                };
                (k, want)
            }
            1 => {
                t.remove(i);
                if k == n {
                    // Cutting off the tail is only visible against an anchor.
                    anchors.push(Anchor {
                        seq: rows[i].seq,
                        hash: rows[i].hash.clone().try_into().unwrap(),
                    });
                    (k, &[Reason::TruncatedBelowAnchor])
                } else {
                    (k, &[Reason::Gap])
                }
            }
            2 => {
                t.insert(i, rows[i].clone());
                (k + 1, &[Reason::Duplicate])
            }
            3 => {
                if k == n {
                    continue;
                }
                t.swap(i, i + 1);
                (k, &[Reason::Reordered])
            }
            _ => {
                // Renumber a row.
                let delta = 1 + rng.below(5) as i64;
                t[i].seq += if rng.below(2) == 0 { delta } else { -delta };
                (k, &[Reason::Gap, Reason::Reordered, Reason::Duplicate])
            }
        };
        let report = verify_rows(&t, &anchors);
        let f = report.failure.as_ref().unwrap_or_else(|| {
            panic!("seed {seed:#x} trial {trial}: tampering at seq {k} was not caught")
        });
        assert_eq!(
            f.seq,
            Some(want_seq as i64),
            "seed {seed:#x} trial {trial}: {f:?}"
        );
        assert!(
            want.contains(&f.reason),
            "seed {seed:#x} trial {trial}: {f:?}, want {want:?}"
        );
        assert_eq!(
            report.rows,
            want_seq as u64 - 1,
            "rows below the first bad seq are verified"
        );
    }
}

#[test]
fn a_rewritten_history_is_caught_by_an_anchor_even_with_recomputed_hashes() {
    let mut rng = Rng(3);
    let s = chain("rewrite", 10, &mut rng);
    let rows = read_rows(&s);
    let anchor = Anchor {
        seq: 8,
        hash: rows[7].hash.clone().try_into().unwrap(),
    };
    // A forger with the key changes row 5 and recomputes every hash after it.
    let mut forged = rows.clone();
    forged[4].body = r#"{"n":4,"s":"nothing to see"}"#.into();
    for i in 4..forged.len() {
        let prev: [u8; 32] = forged[i - 1].hash.clone().try_into().unwrap();
        forged[i].prev = prev.to_vec();
        let mut buf = String::new();
        write_canonical_row(&mut buf, &forged[i].as_ref());
        forged[i].hash = row_hash(&prev, &buf).to_vec();
    }
    assert!(
        verify_rows(&forged, &[]).ok(),
        "without an anchor a full rewrite verifies"
    );
    let f = verify_rows(&forged, &[anchor]).failure.unwrap();
    assert_eq!((f.seq, f.reason), (Some(8), Reason::AnchorMismatch));
}

#[test]
fn a_journal_of_another_vault_or_without_init_fails_at_the_genesis() {
    let mut rng = Rng(4);
    let s = chain("genesis", 3, &mut rng);
    let f = verify_store(s.conn(), "vlt_other", &[])
        .unwrap()
        .failure
        .unwrap();
    assert_eq!((f.seq, f.reason), (Some(1), Reason::BadGenesis));
    let empty = store("empty");
    let f = verify_store(empty.conn(), "vlt_test", &[])
        .unwrap()
        .failure
        .unwrap();
    assert_eq!((f.seq, f.reason), (Some(1), Reason::BadGenesis));
}

#[test]
fn action_states_must_equal_their_last_journal_transition() {
    let mut s = store("actions");
    s.conn()
        .execute_batch("CREATE TABLE actions (id TEXT PRIMARY KEY, state TEXT NOT NULL) STRICT;")
        .unwrap();
    let tx = s.write().unwrap();
    append(
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
        append(
            &tx,
            &format!("action.{state}"),
            Some("ses_1"),
            Some(act),
            &json!({"state": state}),
        )
        .unwrap();
    }
    tx.execute_batch("INSERT INTO actions VALUES ('act_a', 'approved'), ('act_b', 'denied');")
        .unwrap();
    tx.commit().unwrap();
    assert!(verify_store(s.conn(), "vlt_test", &[]).unwrap().ok());

    s.conn()
        .execute(
            "UPDATE actions SET state = 'completed' WHERE id = 'act_a'",
            [],
        )
        .unwrap();
    let f = verify_store(s.conn(), "vlt_test", &[])
        .unwrap()
        .failure
        .unwrap();
    assert_eq!((f.seq, f.reason), (Some(4), Reason::ActionStateMismatch));
    assert!(f.detail.contains("act_a"), "{f:?}");

    s.conn()
        .execute(
            "UPDATE actions SET state = 'approved' WHERE id = 'act_a'",
            [],
        )
        .unwrap();
    s.conn()
        .execute("INSERT INTO actions VALUES ('act_ghost', 'completed')", [])
        .unwrap();
    let f = verify_store(s.conn(), "vlt_test", &[])
        .unwrap()
        .failure
        .unwrap();
    assert_eq!((f.seq, f.reason), (None, Reason::ActionStateMismatch));
    assert!(f.detail.contains("act_ghost"), "{f:?}");
}

#[test]
fn a_rejection_keeps_the_fingerprint_never_the_request() {
    let mut s = store("reject");
    let request = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"http_request","arguments":{"x":"REQUEST_BYTES_MARKER"}}}"#;
    let tx = s.write().unwrap();
    append(
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
        request,
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
    assert!(verify_store(s.conn(), "vlt_test", &[]).unwrap().ok());
}

#[test]
fn activity_and_sessions_are_projections_of_the_journal() {
    let mut s = store("activity");
    let tx = s.write().unwrap();
    append(
        &tx,
        "vault.init",
        None,
        None,
        &json!({"vault_id": "vlt_test"}),
    )
    .unwrap();
    append(&tx, "session.start", Some("ses_1"), None, &json!({
        "client": {"name": "claude-code", "version": "2.1.0"}, "parent": {"pid": 42, "exe": "/usr/bin/node"},
        "profile": "default", "protocol_version": "2025-11-25"})).unwrap();
    let action = |state: &str| {
        json!({"state": state, "tool": "http_request", "credential": "api",
        "summary": "POST https://api.example.com/v1/items (credential api)"})
    };
    for state in ["pending", "approved", "dispatched", "completed"] {
        append(
            &tx,
            &format!("action.{state}"),
            Some("ses_1"),
            Some("act_1"),
            &action(state),
        )
        .unwrap();
    }
    append(
        &tx,
        "action.pending",
        Some("ses_1"),
        Some("act_2"),
        &action("pending"),
    )
    .unwrap();
    record_rejection(&tx, Some("ses_1"), -32602, "bad params", b"{}", None).unwrap();
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
    append(
        &tx,
        "action.withdrawn",
        Some("ses_1"),
        Some("act_2"),
        &json!({"state": "withdrawn"}),
    )
    .unwrap();
    append(
        &tx,
        "session.end",
        Some("ses_1"),
        None,
        &json!({"reason": "eof"}),
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
    append(
        &tx,
        "vault.init",
        None,
        None,
        &json!({"vault_id": "vlt_test"}),
    )
    .unwrap();
    for _ in 1..ANCHOR_EVERY - 1 {
        append(&tx, "x", None, None, &json!({})).unwrap();
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
    let last = append(&tx, "x", None, None, &json!({})).unwrap();
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
    let f = verify_store(s.conn(), "vlt_test", &read_anchors(&paths).unwrap())
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
    let report = verify_file(&file, &[]).unwrap();
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
    assert_eq!(keys.len(), 8);
    assert!(first["body"].is_object() && first["prev"].as_str().unwrap().len() == 64);
    std::fs::remove_dir_all(&dir).unwrap();
}
