//! `verify --file` against a one-thread reading of the same file (`BufRead::split`, each line
//! pushed in order): equal verdicts, wherever the block edges fall and however many workers read.
use super::sources::verify_file_blocks;
use super::{line, Anchor, Report, Verifier};
use crate::audit::proptests::{chain, Rng};
use std::io::BufRead;
use std::path::Path;

/// The reference: one line after another, the line number counted here.
fn sequential(path: &Path, anchors: &[Anchor]) -> Report {
    let mut v = Verifier::new(None, anchors);
    let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    for (i, text) in file.split(b'\n').enumerate() {
        let text = text.unwrap();
        let mut more = true;
        if let Err(rest) = line::parse_line(&text, &mut Vec::new(), |row, _| more = v.push(row)) {
            more = v.push_malformed(format!("line {}{rest}", i + 1));
        }
        if !more {
            break;
        }
    }
    v.finish().0
}

fn exported(tag: &str, rows: usize, seed: u64) -> Vec<u8> {
    let s = chain(tag, rows, &mut Rng(seed));
    let mut out = Vec::new();
    crate::audit::export_to(s.conn(), &mut out, Path::new("x")).unwrap();
    out
}

/// The journal of `conn` in the first export format, as its writer wrote it (kept here so that
/// files written before the current format are still checked): `{"seq","ts","kind","session",
/// "action","body","prev","hash"}` in that order, the body as stored, a body that is not JSON as a
/// string.
pub(super) fn export_v1(conn: &rusqlite::Connection) -> Vec<u8> {
    use serde_json::value::RawValue;
    #[derive(serde::Serialize)]
    struct Line<'a> {
        seq: i64,
        ts: &'a str,
        kind: &'a str,
        session: Option<&'a str>,
        action: Option<&'a str>,
        body: Body<'a>,
        prev: String,
        hash: String,
    }
    #[derive(serde::Serialize)]
    #[serde(untagged)]
    enum Body<'a> {
        Json(&'a RawValue),
        Damaged(&'a str),
    }
    let mut out = Vec::new();
    let mut stmt = conn
        .prepare(crate::audit::journal_select!("ORDER BY seq"))
        .unwrap();
    let mut rows = stmt.query([]).unwrap();
    while let Some(r) = rows.next().unwrap() {
        let s = crate::audit::StoredRow::from_sql(r).unwrap();
        let line = Line {
            seq: s.seq,
            ts: &s.ts,
            kind: &s.kind,
            session: s.session.as_deref(),
            action: s.action.as_deref(),
            body: match serde_json::from_str::<&RawValue>(&s.body) {
                Ok(raw) => Body::Json(raw),
                Err(_) => Body::Damaged(&s.body),
            },
            prev: hex::encode(&s.prev),
            hash: hex::encode(&s.hash),
        };
        serde_json::to_writer(&mut out, &line).unwrap();
        out.push(b'\n');
    }
    out
}

/// The lines of an export, without their newlines.
fn lines_of(text: &[u8]) -> Vec<&[u8]> {
    text.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect()
}

/// `lines` joined, line `at` (0-based) with one digit of its `ts` changed.
fn with_changed_ts(lines: &[&[u8]], at: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let mut l = l.to_vec();
        if i == at {
            let key = b"\"ts\":\"";
            let p = l.windows(key.len()).position(|w| w == key).unwrap() + key.len();
            // The last digit of the year: still a time, no longer the one hashed.
            l[p + 3] = if l[p + 3] == b'9' { b'8' } else { l[p + 3] + 1 };
        }
        out.extend_from_slice(&l);
        out.push(b'\n');
    }
    out
}

#[test]
fn both_export_formats_verify_and_a_changed_byte_is_named_by_its_seq() {
    let dir = std::env::temp_dir().join(format!("av-file-formats-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let s = chain("file-formats", 40, &mut Rng(23));
    let mut v2 = Vec::new();
    crate::audit::export_to(s.conn(), &mut v2, Path::new("x")).unwrap();
    let v1 = export_v1(s.conn());
    assert!(v2.starts_with(br#"{"v":2,"prev":""#), "the current format");
    assert!(v1.starts_with(br#"{"seq":1,"ts":""#), "the first format");
    let (l1, l2) = (lines_of(&v1), lines_of(&v2));
    assert_eq!(l1.len(), l2.len());
    let good = same_everywhere(&dir, "v1", &v1, &[]);
    assert!(good.ok(), "{good:?}");
    assert_eq!(same_everywhere(&dir, "v2", &v2, &[]), good);
    // One line per format, alternating: each line says which it is.
    let mixed: Vec<u8> = l1
        .iter()
        .zip(&l2)
        .enumerate()
        .flat_map(|(i, (a, b))| [if i % 2 == 0 { *a } else { *b }, b"\n"].concat())
        .collect();
    assert_eq!(same_everywhere(&dir, "mixed", &mixed, &[]), good);
    for at in [0, 1, 17, l1.len() - 1] {
        for (name, lines) in [("v1", &l1), ("v2", &l2)] {
            let text = with_changed_ts(lines, at);
            let report = same_everywhere(&dir, &format!("{name}-ts-{at}"), &text, &[]);
            let failure = report.failure.expect("a changed row fails");
            assert_eq!(
                (failure.seq, failure.reason),
                (Some(at as i64 + 1), super::Reason::HashMismatch),
                "{name}, line {at}: {}",
                failure.detail
            );
        }
    }
    // A version this build does not know is named, not guessed at.
    let v3: Vec<u8> = l2
        .iter()
        .enumerate()
        .flat_map(|(i, l)| {
            let mut l = l.to_vec();
            if i == 4 {
                l[5] = b'3';
            }
            l.push(b'\n');
            l
        })
        .collect();
    let failure = same_everywhere(&dir, "v3", &v3, &[]).failure.unwrap();
    assert_eq!(
        (failure.seq, failure.reason),
        (Some(5), super::Reason::Malformed)
    );
    assert!(
        failure.detail.starts_with("line 5 is in export format 3"),
        "{}",
        failure.detail
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every block size from 1 byte to past the whole file, on one and two workers.
fn same_everywhere(dir: &Path, name: &str, text: &[u8], anchors: &[Anchor]) -> Report {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    let want = sequential(&path, anchors);
    let len = text.len() as u64;
    let mut sizes: Vec<u64> = (1..=16).collect();
    sizes.extend([
        97,
        256,
        511,
        512,
        513,
        len / 3 + 1,
        len / 2,
        len.max(1),
        len + 1,
        1 << 20,
    ]);
    for block in sizes {
        for workers in [1, 2] {
            let got = verify_file_blocks(&path, anchors, None, workers, block).unwrap();
            assert_eq!(
                got, want,
                "{name}: blocks of {block} bytes, {workers} workers"
            );
        }
    }
    want
}

#[test]
fn block_edges_and_workers_never_change_the_verdict() {
    let dir = std::env::temp_dir().join(format!("av-file-blocks-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let good = exported("file-blocks", 12, 7);
    assert!(same_everywhere(&dir, "good", &good, &[]).ok());
    let first_format = export_v1(chain("file-blocks-v1", 12, &mut Rng(7)).conn());
    assert!(same_everywhere(&dir, "good-v1", &first_format, &[]).ok());
    let no_newline = &good[..good.len() - 1];
    assert!(same_everywhere(&dir, "no-final-newline", no_newline, &[]).ok());
    assert!(!same_everywhere(&dir, "empty", b"", &[]).ok());
    assert!(!same_everywhere(&dir, "only-newlines", b"\n\n\n", &[]).ok());
    // Damage at every kind of place: a blank line, a cut line, a line of garbage, CRLF, a long
    // line, bytes that are not UTF-8; each at the start, inside and at the end.
    let lines: Vec<&[u8]> = good
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let long = vec![b'x'; 3000];
    let damage: [&[u8]; 6] = [b"", b"{\"seq\":", b"not json", b"\r", &long, b"\xff\xfe"];
    let mut rng = Rng(0xb10c);
    for (d, bad) in damage.iter().enumerate() {
        for at in [0, lines.len() / 2, lines.len()] {
            let mut text = Vec::new();
            for (i, l) in lines.iter().enumerate() {
                if i == at {
                    text.extend_from_slice(bad);
                    text.push(b'\n');
                }
                text.extend_from_slice(l);
                if d == 3 && i == at {
                    text.push(b'\r');
                }
                text.push(b'\n');
            }
            if at == lines.len() {
                text.extend_from_slice(bad);
                if rng.below(2) == 0 {
                    text.push(b'\n');
                }
            }
            let report = same_everywhere(&dir, &format!("damage-{d}-at-{at}"), &text, &[]);
            if !bad.is_empty() || at < lines.len() {
                assert!(!report.ok(), "damage {d} at line {at} was accepted");
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_malformed_line_is_named_by_its_number_in_the_file() {
    let dir = std::env::temp_dir().join(format!("av-file-lines-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let good = exported("file-lines", 30, 11);
    let mut text: Vec<u8> = Vec::new();
    for (i, l) in good.split_inclusive(|&b| b == b'\n').enumerate() {
        if i == 17 {
            text.extend_from_slice(b"{\"seq\": oops}\n");
        }
        text.extend_from_slice(l);
    }
    let report = same_everywhere(&dir, "line-18", &text, &[]);
    let failure = report.failure.unwrap();
    assert_eq!(failure.seq, Some(18));
    assert!(
        failure.detail.starts_with("line 18 is not a journal row"),
        "{}",
        failure.detail
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Found by the fuzz target `journal_verify` (issue 46): a row re-hashed into the chain as
/// `action.dispatched` with no action (its body a credential's) escaped every lifecycle and basis
/// check and verified, held to the key too. A step of a lifecycle must name its action.
#[test]
fn an_action_row_that_names_no_action_is_refused_at_its_seq() {
    let text = include_bytes!("testdata/dispatch_naming_no_action.jsonl");
    let dir = std::env::temp_dir().join(format!("av-file-noaction-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The sequential reading and the block readers, whatever their edges, agree.
    let report = same_everywhere(&dir, "forged.jsonl", text, &[]);
    let _ = std::fs::remove_dir_all(&dir);
    let failure = report
        .failure
        .expect("a dispatch naming no action verified");
    assert_eq!(failure.seq, Some(3), "{failure:?}");
    assert!(failure.detail.contains("names no action"), "{failure:?}");
}

/// Found by the fuzz target `journal_verify` (issue 46): a signed `grant.revoke` row re-hashed
/// into the chain under a kind this build does not know (`\`), its signature spelled with a
/// leading space. Held to the key, the row went unread, so its revocation vanished and a
/// signature nobody made passed. A signature on a row no person signs is refused where it stands.
#[test]
fn a_signed_row_of_a_kind_nobody_signs_is_refused_held_to_the_key() {
    let text = include_bytes!("testdata/revocation_relabelled.jsonl");
    let dir = std::env::temp_dir().join(format!("av-file-relabel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("forged.jsonl");
    std::fs::write(&path, text).unwrap();
    let init: serde_json::Value =
        serde_json::from_slice(text.split(|b| *b == b'\n').next().unwrap()).unwrap();
    let hex = init["body"]["approver_public_key"].as_str().unwrap();
    let key =
        ed25519_dalek::VerifyingKey::from_bytes(&hex::decode(hex).unwrap().try_into().unwrap())
            .unwrap();
    let plain = super::sources::verify_file_with(&path, &[], None, 2).unwrap();
    let held = super::sources::verify_file_with(&path, &[], Some(&key), 2).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        plain.ok(),
        "the chain itself is intact: {:?}",
        plain.failure
    );
    let failure = held
        .failure
        .expect("held to the key, the relabelled row verified");
    assert_eq!(failure.seq, Some(33), "{failure:?}");
    assert!(failure.detail.contains("no row of its kind"), "{failure:?}");
}
