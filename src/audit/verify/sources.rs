//! What the verifier reads: the journal of a vault database (one read snapshot, then the
//! actions table and the pause switch against it) and an `export-audit` file (JSON lines).
use super::{parallel, Anchor, Failure, Reason, Report, RowRef, Verifier, VerifyError};
use ed25519_dalek::VerifyingKey;
use rusqlite::types::ValueRef;
use rusqlite::Connection;
use std::path::Path;

fn text<'a>(v: ValueRef<'a>, col: &str) -> Result<&'a str, String> {
    match v {
        ValueRef::Text(t) => crate::sys::bytes::utf8(t).map_err(|_| format!("{col} is not UTF-8")),
        _ => Err(format!("{col} is not text")),
    }
}

fn opt_text<'a>(v: ValueRef<'a>, col: &str) -> Result<Option<&'a str>, String> {
    match v {
        ValueRef::Null => Ok(None),
        v => text(v, col).map(Some),
    }
}

fn blob<'a>(v: ValueRef<'a>, col: &str) -> Result<&'a [u8], String> {
    match v {
        ValueRef::Blob(b) => Ok(b),
        _ => Err(format!("{col} is not a blob")),
    }
}

fn db_row<'a>(r: &'a rusqlite::Row<'_>) -> Result<RowRef<'a>, String> {
    let g = |i| r.get_ref(i).map_err(|e| e.to_string());
    let seq = match g(0)? {
        ValueRef::Integer(n) => n,
        _ => return Err("seq is not an integer".into()),
    };
    Ok(RowRef {
        seq,
        ts: text(g(1)?, "ts")?,
        kind: text(g(2)?, "kind")?,
        session: opt_text(g(3)?, "session_id")?,
        action: opt_text(g(4)?, "action_id")?,
        body: text(g(5)?, "body")?,
        prev: blob(g(6)?, "prev")?,
        hash: blob(g(7)?, "hash")?,
    })
}

/// Verifies the journal in a vault database (one read snapshot), its anchors, and, when an
/// `actions` table exists, that each action's state is its last journal transition; with `key`,
/// held to that approver key (the vault's own, from `vault.key.age`). One thread;
/// `verify_store_parallel` reads and hashes on every core.
pub fn verify_store(
    conn: &Connection,
    vault_id: &str,
    anchors: &[Anchor],
    key: Option<&VerifyingKey>,
) -> Result<Report, VerifyError> {
    verify_snapshot(conn, vault_id, anchors, key, |snapshot, v, _| {
        let mut stmt = snapshot.prepare(crate::audit::journal_select!("ORDER BY seq"))?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let more = match db_row(r) {
                Ok(row) => v.push(&row),
                Err(detail) => v.push_malformed(detail),
            };
            if !more {
                break;
            }
        }
        Ok(())
    })
}

/// `verify_store` on every core: each worker opens its own reader of `store` and reads and hashes
/// ranges of `CHUNK_ROWS` seqs up to the snapshot's last row (rows up to it never change: the
/// journal only grows), and the workers take turns checking them in order. Same verdict.
pub fn verify_store_parallel(
    store: &crate::store::Store,
    vault_id: &str,
    anchors: &[Anchor],
    key: Option<&VerifyingKey>,
) -> Result<Report, VerifyError> {
    verify_store_with(
        store,
        vault_id,
        anchors,
        key,
        parallel::workers(),
        parallel::CHUNK_ROWS,
    )
}

/// `verify_store_parallel` with `workers` threads reading `chunk_rows` rows at a time (benches
/// and tests; the vault uses one worker per core).
pub fn verify_store_with(
    store: &crate::store::Store,
    vault_id: &str,
    anchors: &[Anchor],
    key: Option<&VerifyingKey>,
    workers: usize,
    chunk_rows: i64,
) -> Result<Report, VerifyError> {
    let chunk_rows = chunk_rows.max(1);
    verify_snapshot(store.conn(), vault_id, anchors, key, |_, v, last| {
        let chunks = (last + chunk_rows - 1) / chunk_rows;
        let ranges = (0..chunks).map(|k| (k * chunk_rows + 1, ((k + 1) * chunk_rows).min(last)));
        let mut readers = Vec::new();
        for _ in 0..workers.max(1) {
            let conn = store.reader()?;
            let mut scratch = Vec::with_capacity(512);
            readers.push(move |(lo, hi): (i64, i64), chunk: &mut parallel::Chunk| {
                let mut stmt = conn.prepare_cached(crate::audit::journal_select!(
                    "WHERE seq BETWEEN ?1 AND ?2 ORDER BY seq"
                ))?;
                let mut rows = stmt.query([lo, hi])?;
                while let Some(r) = rows.next()? {
                    match db_row(r) {
                        Ok(row) => chunk.push(&row, &mut scratch),
                        Err(detail) => {
                            chunk.malformed(detail);
                            break;
                        }
                    }
                }
                Ok::<(), VerifyError>(())
            });
        }
        parallel::run(v, ranges, readers)
    })
}

/// The checks around the rows: one read snapshot, the rows fed to a `Verifier` by `feed` (given
/// the snapshot's last seq), then the actions table and the pause switch against the verdict.
fn verify_snapshot(
    conn: &Connection,
    vault_id: &str,
    anchors: &[Anchor],
    key: Option<&VerifyingKey>,
    feed: impl FnOnce(&Connection, &mut Verifier, i64) -> Result<(), VerifyError>,
) -> Result<Report, VerifyError> {
    let snapshot = conn.unchecked_transaction()?;
    let has_actions: bool = snapshot.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'actions'",
        [],
        |r| r.get(0),
    )?;
    let last: i64 =
        snapshot.query_row("SELECT coalesce(max(seq), 0) FROM audit", [], |r| r.get(0))?;
    let mut v = held(Verifier::new(Some(vault_id), anchors), key);
    feed(&snapshot, &mut v, last)?;
    let (mut report, transitions, paused) = v.finish();
    if report.ok() && has_actions {
        report.failure = check_actions(&snapshot, &transitions)?;
    }
    if report.ok() {
        let meta_paused = crate::store::get_meta(&snapshot, "paused")?.is_some();
        if meta_paused != paused {
            report.failure = Some(Failure {
                seq: None,
                reason: Reason::PauseStateMismatch,
                detail: format!(
                    "the journal's last pause row says {}, but the meta table says {}: someone edited the pause switch outside the vault",
                    if paused { "paused" } else { "not paused" },
                    if meta_paused { "paused" } else { "not paused" }
                ),
            });
        }
    }
    Ok(report)
}

fn check_actions(
    conn: &Connection,
    transitions: &super::Transitions,
) -> Result<Option<Failure>, VerifyError> {
    let mut stmt = conn.prepare("SELECT id, state FROM actions ORDER BY id")?;
    let mut rows = stmt.query([])?;
    let mut worst: Option<Failure> = None;
    while let Some(r) = rows.next()? {
        let (id, state): (String, String) = (r.get(0)?, r.get(1)?);
        let found = match transitions.get(&id) {
            Some((_, s)) if s.as_str() == state => continue,
            Some((seq, s)) => Failure {
                seq: Some(seq),
                reason: Reason::ActionStateMismatch,
                detail: format!("action {id} is {state:?} in the actions table, but its last journal transition (seq {seq}) is {:?}", s.as_str()),
            },
            None => Failure {
                seq: None,
                reason: Reason::ActionStateMismatch,
                detail: format!("action {id} is {state:?} in the actions table, but the journal has no transition for it"),
            },
        };
        // Report the mismatch earliest in the journal; one with no journal row comes last.
        let earlier = match (&worst, found.seq) {
            (None, _) => true,
            (Some(w), Some(s)) => w.seq.is_none_or(|ws| s < ws),
            (Some(_), None) => false,
        };
        if earlier {
            worst = Some(found);
        }
    }
    Ok(worst)
}

/// `v`, held to `key` if one is given.
fn held(v: Verifier, key: Option<&VerifyingKey>) -> Verifier {
    match key {
        Some(k) => v.held_to(*k),
        None => v,
    }
}

/// Verifies an export (`vault export-audit`) with no keyring or vault: the genesis comes from
/// row 1's `vault_id`; `anchors` are heads the person kept elsewhere; `key`, the approver public
/// key the person kept elsewhere, holds every signature and dispatch to it. Workers (one per
/// core) each read, parse and hash the lines that start in a block of the file (`parallel`).
pub fn verify_file(
    path: &Path,
    anchors: &[Anchor],
    key: Option<&VerifyingKey>,
) -> Result<Report, VerifyError> {
    verify_file_with(path, anchors, key, parallel::workers())
}

/// `verify_file` with `workers` threads.
pub fn verify_file_with(
    path: &Path,
    anchors: &[Anchor],
    key: Option<&VerifyingKey>,
    workers: usize,
) -> Result<Report, VerifyError> {
    verify_file_blocks(path, anchors, key, workers, BLOCK)
}

/// `verify_file_with` in blocks of `block` bytes (tests put block edges everywhere).
pub(super) fn verify_file_blocks(
    path: &Path,
    anchors: &[Anchor],
    key: Option<&VerifyingKey>,
    workers: usize,
    block: u64,
) -> Result<Report, VerifyError> {
    let block = block.max(1);
    let read_err = |source| VerifyError::Read {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let len = file.metadata().map_err(read_err)?.len();
    let mut v = held(Verifier::new(None, anchors), key);
    let blocks = (0..len.div_ceil(block)).map(|k| (k * block, ((k + 1) * block).min(len)));
    let parsers = (0..workers.max(1))
        .map(|_| {
            let (file, mut buf, mut scratch) = (&file, Vec::new(), Vec::with_capacity(512));
            let mut quotes = Vec::with_capacity(128);
            move |(from, to): (u64, u64), chunk: &mut parallel::Chunk| {
                let lines = lines_starting_in(file, from, to, len, &mut buf).map_err(read_err)?;
                for text in lines {
                    let pushed =
                        super::line::parse_line(text, &mut quotes, |row, hash| match hash {
                            Some(hash) => chunk.push_hashed(row, hash),
                            None => chunk.push(row, &mut scratch),
                        });
                    if let Err(detail) = pushed {
                        chunk.malformed_line(detail);
                        break;
                    }
                }
                Ok::<(), VerifyError>(())
            }
        })
        .collect();
    parallel::run(&mut v, blocks, parsers)?;
    Ok(v.finish().0)
}

/// Bytes of an export per block handed to a worker.
const BLOCK: u64 = 1 << 20;

/// The lines of `file` (of `len` bytes) that start at an offset in `from..to`, without their
/// newlines, read into `buf`: a line starts at 0 and after each newline; the last one may run past
/// `to` and ends at its newline or at the end of the file. Together the blocks of a file give each
/// of its lines exactly once, as `BufRead::split(b'\n')` would.
fn lines_starting_in<'b>(
    file: &std::fs::File,
    from: u64,
    to: u64,
    len: u64,
    buf: &'b mut Vec<u8>,
) -> std::io::Result<impl Iterator<Item = &'b [u8]>> {
    use std::os::unix::fs::FileExt;
    // One byte before the block says whether a line starts at `from`.
    let start = from.saturating_sub(1);
    // `buf[..filled]` holds what was read; the rest is left from the block before (never zeroed
    // again: the reads overwrite it).
    let mut filled = 0;
    let mut read = |buf: &mut Vec<u8>, at: u64, n: u64| {
        let end = filled + n as usize;
        if buf.len() < end {
            buf.resize(end, 0);
        }
        file.read_exact_at(&mut buf[filled..end], at)?;
        filled = end;
        Ok::<usize, std::io::Error>(end)
    };
    let mut end = read(buf, start, to - start)?;
    // The last line that starts in the block runs to its newline, past `to` if need be.
    if buf[end - 1] != b'\n' {
        let mut at = to;
        loop {
            let scanned = end;
            if at == len {
                break;
            }
            let n = (len - at).min(64 << 10);
            end = read(buf, at, n)?;
            at += n;
            if let Some(nl) = memchr::memchr(b'\n', &buf[scanned..end]) {
                end = scanned + nl + 1;
                break;
            }
        }
    }
    let first = if from == 0 {
        0
    } else {
        // After the first newline at or after `from - 1`; none before `to`: no line starts here.
        match memchr::memchr(b'\n', &buf[..(to - start) as usize]) {
            Some(nl) => nl + 1,
            None => end,
        }
    };
    let text = &buf[first.min(end)..end];
    let text = text.strip_suffix(b"\n").unwrap_or(text);
    let mut rest = (!text.is_empty() || first < end).then_some(text);
    Ok(std::iter::from_fn(move || {
        let t = rest?;
        match memchr::memchr(b'\n', t) {
            Some(nl) => {
                rest = Some(&t[nl + 1..]);
                Some(&t[..nl])
            }
            None => {
                rest = None;
                Some(t)
            }
        }
    }))
}
