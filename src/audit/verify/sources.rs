//! What the verifier reads: the journal of a vault database (one read snapshot, then the
//! actions table and the pause switch against it) and an `export-audit` file (JSON lines).
use super::{Anchor, Failure, Reason, Report, RowRef, Verifier, VerifyError};
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
/// `actions` table exists, that each action's state is its last journal transition.
pub fn verify_store(
    conn: &Connection,
    vault_id: &str,
    anchors: &[Anchor],
) -> Result<Report, VerifyError> {
    let snapshot = conn.unchecked_transaction()?;
    let has_actions: bool = snapshot.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'actions'",
        [],
        |r| r.get(0),
    )?;
    let mut v = Verifier::new(Some(vault_id), anchors);
    {
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
    }
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
    transitions: &HashMap<String, (i64, String)>,
) -> Result<Option<Failure>, VerifyError> {
    let mut stmt = conn.prepare("SELECT id, state FROM actions ORDER BY id")?;
    let mut rows = stmt.query([])?;
    let mut worst: Option<Failure> = None;
    while let Some(r) = rows.next()? {
        let (id, state): (String, String) = (r.get(0)?, r.get(1)?);
        let found = match transitions.get(&id) {
            Some((seq, s)) if *s == state => continue,
            Some((seq, s)) => Failure {
                seq: Some(*seq),
                reason: Reason::ActionStateMismatch,
                detail: format!("action {id} is {state:?} in the actions table, but its last journal transition (seq {seq}) is {s:?}"),
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
/// from row 1's `vault_id`; `anchors` are heads the person kept elsewhere.
pub fn verify_file(path: &Path, anchors: &[Anchor]) -> Result<Report, VerifyError> {
    let read_err = |source| VerifyError::Read {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut v = Verifier::new(None, anchors);
    let mut line = Vec::with_capacity(1024);
    let mut number = 0u64;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(read_err)? == 0 {
            break;
        }
        number += 1;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let more = match serde_json::from_slice::<ExportLine<'_>>(text) {
            Err(e) => v.push_malformed(format!("line {number} is not a journal row: {e}")),
            Ok(l) => match (hex32(l.prev, "prev"), hex32(l.hash, "hash")) {
                (Ok(prev), Ok(hash)) => v.push(&RowRef {
                    seq: l.seq,
                    ts: &l.ts,
                    kind: &l.kind,
                    session: l.session.as_deref(),
                    action: l.action.as_deref(),
                    body: l.body.get(),
                    prev: &prev,
                    hash: &hash,
                }),
                (Err(e), _) | (_, Err(e)) => v.push_malformed(format!("line {number}: {e}")),
            },
        };
        if !more {
            break;
        }
    }
    Ok(v.finish().0)
}
