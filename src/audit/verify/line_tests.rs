//! The export line reader's fast path against serde: same rows, and never a line serde refuses.
use super::*;
use crate::audit::proptests::{chain, Rng};

/// A row as owned values, to compare.
type Owned = (
    i64,
    String,
    String,
    Option<String>,
    Option<String>,
    String,
    Vec<u8>,
    Vec<u8>,
);

fn owned(r: &RowRef<'_>) -> Owned {
    let s = |s: &str| s.to_owned();
    (
        r.seq,
        s(r.ts),
        s(r.kind),
        r.session.map(s),
        r.action.map(s),
        s(r.body),
        r.prev.to_vec(),
        r.hash.to_vec(),
    )
}

/// What the fast path of the line's format reads from it, if it reads it. The current format's
/// hash of the text in place must be the hash of the row re-serialised.
fn by_fast(text: &[u8]) -> Option<Owned> {
    let (mut prev, mut hash) = ([0u8; 32], [0u8; 32]);
    if text.starts_with(V2_PREFIX.as_bytes()) {
        let (row, computed) = fast_v2(text, &mut prev, &mut hash, &mut Vec::new())?;
        let show = String::from_utf8_lossy(text);
        assert_eq!(
            computed,
            super::super::computed_hash(&mut Vec::new(), &row),
            "{show}"
        );
        return Some(owned(&row));
    }
    fast(text, &mut prev, &mut hash, &mut Vec::new()).map(|r| owned(&r))
}

/// What serde reads from a line, or its error.
fn by_serde(text: &[u8]) -> Result<Owned, String> {
    let mut out = None;
    parse_with_serde(text, |r| out = Some(owned(r)))?;
    Ok(out.unwrap())
}

/// The lines of `s`'s export in both formats: the current one, then the first.
fn exported(s: &crate::store::Store) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    crate::audit::export_to(s.conn(), &mut out, std::path::Path::new("x")).unwrap();
    out.extend(super::super::file_tests::export_v1(s.conn()));
    out.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

/// Only JSON-significant and awkward bytes, so a mutation usually changes the structure.
const NOISE: &[u8] = b"{}[]\",:\\ \t\n0123456789-+.eEtrufalsn\x01\xc3\xa9\xff";

fn mutate(line: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut m = line.to_vec();
    for _ in 0..=rng.below(3) {
        let at = rng.below(m.len() + 1);
        let c = NOISE[rng.below(NOISE.len())];
        match rng.below(4) {
            0 if at < m.len() => m[at] = c,
            1 => m.insert(at, c),
            2 if at < m.len() => {
                m.remove(at);
            }
            _ => {
                let end = (at + rng.below(16)).min(m.len());
                let piece = m[at..end].to_vec();
                m.splice(at..at, piece);
            }
        }
    }
    m
}

#[test]
fn the_fast_path_reads_what_serde_reads_or_leaves_the_line_to_it() {
    for seed in 1..=20u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let s = chain(&format!("line-{seed}"), 60, &mut rng);
        let (mut fast_lines, mut fast_mutants, mut mutants) = (0, 0, 0);
        for line in exported(&s) {
            let want = by_serde(&line).expect("an export line is a row");
            if let Some(got) = by_fast(&line) {
                assert_eq!(got, want, "{}", String::from_utf8_lossy(&line));
                fast_lines += 1;
            }
            for _ in 0..200 {
                let m = mutate(&line, &mut rng);
                mutants += 1;
                if let Some(got) = by_fast(&m) {
                    fast_mutants += 1;
                    let show = String::from_utf8_lossy(&m);
                    let want = by_serde(&m)
                        .unwrap_or_else(|e| panic!("fast read a line serde refuses ({e}): {show}"));
                    assert_eq!(got, want, "{show}");
                }
            }
        }
        // Most random texts hold a quote, backslash or control character (serde's lines).
        assert!(fast_lines >= 2, "seed {seed}: no line read fast");
        assert!(
            fast_mutants > 0 && fast_mutants < mutants,
            "seed {seed}: {fast_mutants} of {mutants}"
        );
    }
}

#[test]
fn every_line_of_a_journal_with_plain_texts_takes_the_fast_path() {
    let mut s = crate::audit::tests::store("line-plain");
    let tx = s.write().unwrap();
    let init = serde_json::json!({"vault_id": "vlt_test"});
    crate::audit::append_row(&tx, "vault.init", None, None, &init).unwrap();
    for i in 0..40i64 {
        let body = serde_json::json!({
            "n": i, "neg": -i, "f": i as f64 / 3.0, "big": 1e300, "t": true, "z": null,
            "s": format!("é→ /{i}"), "a": [[], {}, [i, {"k": "v"}]],
        });
        let (session, action) = (format!("ses_{i}"), format!("act_{i}"));
        let action = (i % 2 == 0).then_some(action.as_str());
        crate::audit::append_row(&tx, "action.pending", Some(&session), action, &body).unwrap();
    }
    tx.commit().unwrap();
    for line in exported(&s) {
        let got = by_fast(&line).unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&line)));
        assert_eq!(got, by_serde(&line).unwrap());
    }
}
