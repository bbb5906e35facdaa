//! The audit bench's peers and parts: the bytes the verifier hashes, reading `vault.db` alone,
//! the in-order checks alone, and the approver's signatures checked alone (in batches of a
//! chunk's worth, as the verifier's workers check them).
use super::median3;
use agent_vault::audit;
use ed25519_dalek::{Signature, VerifyingKey};
use rusqlite::Connection;
use std::time::{Duration, Instant};

/// Every row's `prev ‖ canonical row` (the bytes the verifier hashes), end to end in one buffer,
/// with each row's end offset and its stored hash.
pub fn hashed_bytes(conn: &Connection) -> (Vec<u8>, Vec<usize>, Vec<[u8; 32]>) {
    let json = |s: &str| serde_json::to_string(s).unwrap();
    let opt = |s: Option<String>| s.as_deref().map_or("null".to_string(), json);
    let (mut buf, mut ends, mut hashes) = (Vec::new(), Vec::new(), Vec::new());
    let mut stmt = conn
        .prepare(
            "SELECT seq, ts, kind, session_id, action_id, body, prev, hash FROM audit ORDER BY seq",
        )
        .unwrap();
    let mut rows = stmt.query([]).unwrap();
    while let Some(r) = rows.next().unwrap() {
        let (seq, ts, kind): (i64, String, String) =
            (r.get(0).unwrap(), r.get(1).unwrap(), r.get(2).unwrap());
        let (session, action): (Option<String>, Option<String>) =
            (r.get(3).unwrap(), r.get(4).unwrap());
        let body: String = r.get(5).unwrap();
        let prev: Vec<u8> = r.get(6).unwrap();
        let hash: Vec<u8> = r.get(7).unwrap();
        let row = format!(
            "{{\"action\":{},\"body\":{body},\"kind\":{},\"seq\":{seq},\"session\":{},\"ts\":{}}}",
            opt(action),
            json(&kind),
            opt(session),
            json(&ts)
        );
        buf.extend_from_slice(&prev);
        buf.extend_from_slice(row.as_bytes());
        ends.push(buf.len());
        hashes.push(hash.try_into().expect("32-byte hash"));
    }
    (buf, ends, hashes)
}

/// Steps over every journal row in `vault.db` touching each column (SQLCipher decrypts and checks
/// every page); returns the bytes seen so the work cannot be skipped.
pub fn read_only(conn: &Connection) -> usize {
    let mut stmt = conn
        .prepare(
            "SELECT seq, ts, kind, session_id, action_id, body, prev, hash FROM audit ORDER BY seq",
        )
        .unwrap();
    let mut rows = stmt.query([]).unwrap();
    let mut seen = 0;
    while let Some(r) = rows.next().unwrap() {
        for i in 0..8 {
            seen += match r.get_ref(i).unwrap() {
                rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => t.len(),
                _ => 1,
            };
        }
    }
    seen
}

/// The part of verifying that needs the order (seq, links, anchors, lifecycle, and held to the
/// approver's key what each dispatch rests on), alone: every row read into memory first, its
/// facts (hash, signature checked) given as computed (the work the verifier's workers do).
pub fn in_order_checks(conn: &Connection, vault_id: &str, key: &VerifyingKey) -> Duration {
    type Row = (
        i64,
        String,
        String,
        Option<String>,
        Option<String>,
        String,
        Vec<u8>,
        Vec<u8>,
    );
    let rows: Vec<Row> = conn
        .prepare(
            "SELECT seq, ts, kind, session_id, action_id, body, prev, hash FROM audit ORDER BY seq",
        )
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
                r.get(7)?,
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let refs: Vec<audit::RowRef<'_>> = rows
        .iter()
        .map(|r| audit::RowRef {
            seq: r.0,
            ts: &r.1,
            kind: &r.2,
            session: r.3.as_deref(),
            action: r.4.as_deref(),
            body: &r.5,
            prev: &r.6,
            hash: &r.7,
        })
        .collect();
    let mut buf = Vec::new();
    let facts: Vec<audit::Facts> = refs
        .iter()
        .map(|r| audit::Facts::of_held(&mut buf, r, key))
        .collect();
    median3(|| {
        let t = Instant::now();
        let mut v = audit::Verifier::new(Some(vault_id), &[]).held_to(*key);
        for (row, facts) in refs.iter().zip(&facts) {
            assert!(v.push_facts(row, facts));
        }
        let d = t.elapsed();
        assert!(v.finish().0.held());
        d
    })
}

/// The signed rows' messages (each payload's tag and text) and signatures, as the verifier reads
/// them from the bodies.
pub fn signed_rows(conn: &Connection) -> Vec<(Vec<u8>, Signature)> {
    #[derive(serde::Deserialize)]
    struct Row {
        signed: Option<agent_vault::wire::journal::RowSignature>,
    }
    let mut stmt = conn
        .prepare("SELECT body FROM audit WHERE kind = 'action.approved' ORDER BY seq")
        .unwrap();
    let mut rows = stmt.query([]).unwrap();
    let mut out = Vec::new();
    while let Some(r) = rows.next().unwrap() {
        let body: String = r.get(0).unwrap();
        let Some(sig) = serde_json::from_str::<Row>(&body).unwrap().signed else {
            continue;
        };
        use agent_vault::wire::Payload;
        let mut message = agent_vault::wire::DecisionPayload::TAG.to_vec();
        message.extend_from_slice(sig.payload.get().as_bytes());
        let bytes = hex::decode(&sig.signature).unwrap();
        out.push((message, Signature::from_slice(&bytes).unwrap()));
    }
    out
}

/// Checking `signed` alone, on one thread, `per_batch` at a time in one batch each (a chunk of
/// the verifier's rows holds about that many).
pub fn signatures_alone(
    signed: &[(Vec<u8>, Signature)],
    key: &VerifyingKey,
    per_batch: usize,
) -> Duration {
    median3(|| {
        let t = Instant::now();
        for batch in signed.chunks(per_batch.max(1)) {
            let messages: Vec<&[u8]> = batch.iter().map(|(m, _)| m.as_slice()).collect();
            let sigs: Vec<Signature> = batch.iter().map(|(_, s)| *s).collect();
            let keys = vec![*key; sigs.len()];
            ed25519_dalek::verify_batch(&messages, &sigs, &keys).expect("the journal's signatures");
        }
        t.elapsed()
    })
}
