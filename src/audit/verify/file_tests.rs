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
        if let Err(rest) = line::parse_line(&text, |row| more = v.push(row)) {
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
            let got = verify_file_blocks(&path, anchors, workers, block).unwrap();
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
