//! What the verifier reads: the journal of a vault database (one read snapshot, then the
//! actions table and the pause switch against it) and an `export-audit` file (JSON lines).
use super::{parallel, Anchor, Failure, Reason, Report, RowRef, Verifier, VerifyError};
use crate::wire::State;
use rusqlite::types::ValueRef;
use rusqlite::Connection;
use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;

fn text<'a>(v: ValueRef<'a>, col: &str) -> Result<&'a str, String> {
    match v {
        ValueRef::Text(t) => std::str::from_utf8(t).map_err(|_| format!("{col} is not UTF-8")),
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
/// `actions` table exists, that each action's state is its last journal transition. One thread;
/// `verify_store_parallel` reads and hashes on every core.
pub fn verify_store(
    conn: &Connection,
    vault_id: &str,
    anchors: &[Anchor],
) -> Result<Report, VerifyError> {
    verify_snapshot(conn, vault_id, anchors, |snapshot, v, _| {
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
/// journal only grows), and this thread checks them in order. Same verdict.
pub fn verify_store_parallel(
    store: &crate::store::Store,
    vault_id: &str,
    anchors: &[Anchor],
) -> Result<Report, VerifyError> {
    verify_store_with(
        store,
        vault_id,
        anchors,
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
    workers: usize,
    chunk_rows: i64,
) -> Result<Report, VerifyError> {
    let chunk_rows = chunk_rows.max(1);
    verify_snapshot(store.conn(), vault_id, anchors, |_, v, last| {
        let chunks = (last + chunk_rows - 1) / chunk_rows;
        let ranges = (0..chunks).map(|k| (k * chunk_rows + 1, ((k + 1) * chunk_rows).min(last)));
        let mut readers = Vec::new();
        for _ in 0..workers.max(1) {
            let conn = store.reader().map_err(|e| {
                VerifyError::Sql(rusqlite::Error::InvalidParameterName(e.to_string()))
            })?;
            let mut scratch = String::with_capacity(512);
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
    let mut v = Verifier::new(Some(vault_id), anchors);
    feed(&snapshot, &mut v, last)?;
    let (mut report, transitions, paused) = v.finish();
    if report.ok() && has_actions {
        report.failure = check_actions(&snapshot, &transitions)?;
    }
    if report.ok() {
        let meta_paused = crate::store::get_meta(&snapshot, "paused")
            .map_err(|e| VerifyError::Sql(rusqlite::Error::InvalidParameterName(e.to_string())))?
            .is_some();
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
    transitions: &HashMap<Box<str>, (i64, State)>,
) -> Result<Option<Failure>, VerifyError> {
    let mut stmt = conn.prepare("SELECT id, state FROM actions ORDER BY id")?;
    let mut rows = stmt.query([])?;
    let mut worst: Option<Failure> = None;
    while let Some(r) = rows.next()? {
        let (id, state): (String, String) = (r.get(0)?, r.get(1)?);
        let found = match transitions.get(id.as_str()) {
            Some((_, s)) if s.as_str() == state => continue,
            Some((seq, s)) => Failure {
                seq: Some(*seq),
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

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportLine<'a> {
    seq: i64,
    #[serde(borrow)]
    ts: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    session: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    action: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    body: &'a serde_json::value::RawValue,
    prev: &'a str,
    hash: &'a str,
}

/// Lowercase hex of exactly 32 bytes (as `export-audit` writes it), nothing else.
fn hex32(s: &str, field: &str) -> Result<[u8; 32], String> {
    crate::audit::hex32(s).ok_or_else(|| format!("{field} is not 64 lowercase hex digits"))
}

/// Verifies an export (`vault export-audit`) with no key, keyring or vault: the genesis comes
/// from row 1's `vault_id`; `anchors` are heads the person kept elsewhere. This thread reads the
/// file in blocks of whole lines; workers (one per core) parse and hash them (`parallel`).
pub fn verify_file(path: &Path, anchors: &[Anchor]) -> Result<Report, VerifyError> {
    verify_file_with(path, anchors, parallel::workers())
}

/// `verify_file` with `workers` threads.
pub fn verify_file_with(
    path: &Path,
    anchors: &[Anchor],
    workers: usize,
) -> Result<Report, VerifyError> {
    let read_err = |source| VerifyError::Read {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut v = Verifier::new(None, anchors);
    let mut io_error = None;
    let mut number = 0u64;
    let blocks = std::iter::from_fn(|| {
        let mut block = Vec::with_capacity(BLOCK + 4096);
        let first = number + 1;
        while block.len() < BLOCK {
            match reader.read_until(b'\n', &mut block) {
                Ok(0) => break,
                Ok(_) => number += 1,
                Err(e) => {
                    io_error = Some(e);
                    break;
                }
            }
        }
        (!block.is_empty()).then_some((first, block))
    });
    let parsers = (0..workers.max(1))
        .map(|_| {
            let mut scratch = String::with_capacity(512);
            move |(first, block): (u64, Vec<u8>), chunk: &mut parallel::Chunk| {
                let lines = block.strip_suffix(b"\n").unwrap_or(&block);
                for (number, text) in (first..).zip(lines.split(|&b| b == b'\n')) {
                    let pushed = parse_line(number, text, |row| chunk.push(row, &mut scratch));
                    if let Err(detail) = pushed {
                        chunk.malformed(detail);
                        break;
                    }
                }
                Ok::<(), VerifyError>(())
            }
        })
        .collect();
    parallel::run(&mut v, blocks, parsers)?;
    if let Some(e) = io_error {
        return Err(read_err(e));
    }
    Ok(v.finish().0)
}

/// Lines of an export per block handed to a worker (about 1 MiB).
const BLOCK: usize = 1 << 20;

/// One export line as a row, given to `push`; `Err` says why it is not one.
fn parse_line(number: u64, text: &[u8], push: impl FnOnce(&RowRef<'_>)) -> Result<(), String> {
    let l = serde_json::from_slice::<ExportLine<'_>>(text)
        .map_err(|e| format!("line {number} is not a journal row: {e}"))?;
    let prev = hex32(l.prev, "prev").map_err(|e| format!("line {number}: {e}"))?;
    let hash = hex32(l.hash, "hash").map_err(|e| format!("line {number}: {e}"))?;
    push(&RowRef {
        seq: l.seq,
        ts: &l.ts,
        kind: &l.kind,
        session: l.session.as_deref(),
        action: l.action.as_deref(),
        body: l.body.get(),
        prev: &prev,
        hash: &hash,
    });
    Ok(())
}
