//! Seeded property tests of verification: any chain `append` builds verifies, and every flipped
//! bit, deleted, duplicated, swapped or renumbered row, cut tail or full rewrite is caught at the
//! first bad seq with the right reason.
use super::tests::store;
use super::*;
use crate::store::Store;
use serde_json::json;

/// A small deterministic PRNG (xorshift64*), so failures reproduce from the printed seed.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub(super) fn text(&mut self) -> String {
        const CHARS: &[char] = &['a', 'Z', '0', ' ', '"', '\\', '\n', '\u{1}', 'é', '→', '/'];
        (0..self.below(12))
            .map(|_| CHARS[self.below(CHARS.len())])
            .collect()
    }
}

/// An owned journal row, as read from the database.
pub(super) type Owned = super::StoredRow;

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

pub(super) fn read_rows(s: &Store) -> Vec<Owned> {
    s.conn()
        .prepare(super::journal_select!("ORDER BY seq"))
        .unwrap()
        .query_map([], Owned::from_sql)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// What a forger holding the database key does: replaces row `seq`'s body with `body` and
/// re-hashes the chain from there on, so the chain itself stays intact.
pub(crate) fn rewrite_from(s: &mut Store, seq: i64, body: &str) {
    let mut rows = read_rows(s);
    rows[seq as usize - 1].body = body.to_owned();
    let tx = s.write().unwrap();
    tx.execute_batch(
        "DROP TRIGGER IF EXISTS audit_no_update; DROP TRIGGER IF EXISTS audit_no_delete;",
    )
    .unwrap();
    let mut prev: [u8; 32] = rows[seq as usize - 1].prev.clone().try_into().unwrap();
    let mut buf = String::new();
    for r in rows.iter_mut().skip(seq as usize - 1) {
        r.prev = prev.to_vec();
        write_canonical_row(&mut buf, &r.as_ref());
        r.hash = row_hash(&prev, &buf).to_vec();
        prev = r.hash.clone().try_into().unwrap();
        tx.execute(
            "UPDATE audit SET body = ?2, prev = ?3, hash = ?4 WHERE seq = ?1",
            rusqlite::params![r.seq, r.body, r.prev, r.hash],
        )
        .unwrap();
    }
    tx.commit().unwrap();
}

/// A store whose journal starts with `vault.init` and holds `n` rows with random contents.
pub(super) fn chain(tag: &str, n: usize, rng: &mut Rng) -> Store {
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
    for i in 1..n {
        let session = (rng.below(2) == 0).then(|| format!("ses_{}", rng.text()));
        let action = (rng.below(3) == 0).then(|| format!("act_{i}"));
        let body = json!({"n": i, "s": rng.text(), "nested": {"z": [1, rng.text()], "a": null}});
        let kind = format!("k.{}", rng.text());
        append_row(&tx, &kind, session.as_deref(), action.as_deref(), &body).unwrap();
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
    let one = v.finish().0;
    // The same rows through the parallel pipeline, in chunks of 3 on 2 workers: same verdict.
    let mut v = Verifier::new(Some("vlt_test"), anchors);
    let workers = (0..2)
        .map(|_| {
            let mut scratch = Vec::new();
            move |chunk: &[Owned], out: &mut verify::parallel::Chunk| {
                chunk
                    .iter()
                    .for_each(|r| out.push(&r.as_ref(), &mut scratch));
                Ok::<(), ()>(())
            }
        })
        .collect();
    verify::parallel::run(&mut v, rows.chunks(3), workers).unwrap();
    assert_eq!(
        v.finish().0,
        one,
        "the parallel pipeline gave another verdict"
    );
    one
}

#[test]
fn the_fast_row_form_equals_the_canonical_form() {
    let mut rng = Rng(7);
    let mut buf = String::new();
    let edges = [0, -1, -10, 9, 10, 99, 100, 1_000_000, i64::MAX, i64::MIN];
    for seq in (1..300).chain(edges) {
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
        let report = super::tests::verify_both(&s, "vlt_test", &[]).unwrap();
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
        assert!(super::tests::verify_both(&s, "vlt_test", &anchors)
            .unwrap()
            .ok());
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
    let f = super::tests::verify_both(&s, "vlt_other", &[])
        .unwrap()
        .failure
        .unwrap();
    assert_eq!((f.seq, f.reason), (Some(1), Reason::BadGenesis));
    let empty = store("empty");
    let f = super::tests::verify_both(&empty, "vlt_test", &[])
        .unwrap()
        .failure
        .unwrap();
    assert_eq!((f.seq, f.reason), (Some(1), Reason::BadGenesis));
}
