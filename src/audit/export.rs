//! Exporting the journal as JSON lines that anyone can re-check without the key:
//! `{"seq","ts","kind","session","action","body","prev","hash"}`, body as the stored canonical
//! JSON object, hashes as lowercase hex.
use super::verify::Head;
use super::StoredRow;
use crate::paths::{self, PathError};
use rusqlite::Connection;
use serde::Serialize;
use serde_json::value::RawValue;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Errors exporting the journal.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("cannot write {path}: {source}; check free space and permissions, then export again (the partial file was removed)")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("database error reading the journal: {0}; run `vault verify`")]
    Sql(#[from] rusqlite::Error),
}

/// What was exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exported {
    pub rows: u64,
    pub head: Option<Head>,
}

/// Writes every journal row (one read snapshot) to a new 0600 file at `path` (`create_new`: an
/// existing file is never overwritten). On failure the partial file is removed.
pub fn export(conn: &Connection, path: &Path) -> Result<Exported, ExportError> {
    let file = paths::create_new_private(path)?;
    let result = write_rows(conn, file, path);
    if result.is_err() {
        let _ = std::fs::remove_file(path);
    }
    result
}

/// One exported row, keys in this order (`verify --file` reads it back).
#[derive(Serialize)]
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

#[derive(Serialize)]
#[serde(untagged)]
enum Body<'a> {
    Json(&'a RawValue),
    Damaged(&'a str),
}

fn write_rows(
    conn: &Connection,
    file: std::fs::File,
    path: &Path,
) -> Result<Exported, ExportError> {
    let write_err = |source| ExportError::Write {
        path: path.to_owned(),
        source,
    };
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let exported = export_to(conn, &mut out, path)?;
    let file = out.into_inner().map_err(|e| write_err(e.into_error()))?;
    file.sync_all().map_err(write_err)?;
    Ok(exported)
}

/// Writes every journal row of `conn` (an `audit` table with the journal's columns: the vault's,
/// or a copy of it) to `out` in the export's form; `path` names `out` in errors.
pub fn export_to(
    conn: &Connection,
    out: &mut dyn Write,
    path: &Path,
) -> Result<Exported, ExportError> {
    let write_err = |source| ExportError::Write {
        path: path.to_owned(),
        source,
    };
    let mut stmt = conn.prepare(super::journal_select!("ORDER BY seq"))?;
    let mut rows = stmt.query([])?;
    let mut exported = Exported {
        rows: 0,
        head: None,
    };
    while let Some(r) = rows.next()? {
        let StoredRow {
            seq,
            ts,
            kind,
            session,
            action,
            body,
            prev,
            hash,
        } = StoredRow::from_sql(r)?;
        let line = Line {
            seq,
            ts: &ts,
            kind: &kind,
            session: session.as_deref(),
            action: action.as_deref(),
            // The stored canonical text, unchanged, so the export hashes exactly as the database
            // does; a body that is not JSON (a damaged row) is kept as a string, and fails to
            // verify.
            body: match serde_json::from_str::<&RawValue>(&body) {
                Ok(raw) => Body::Json(raw),
                Err(_) => Body::Damaged(&body),
            },
            prev: hex::encode(&prev),
            hash: hex::encode(&hash),
        };
        serde_json::to_writer(&mut *out, &line)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
            .map_err(write_err)?;
        exported.rows += 1;
        if let Ok(hash) = <[u8; 32]>::try_from(hash) {
            exported.head = Some(Head { seq, hash });
        }
    }
    out.flush().map_err(write_err)?;
    Ok(exported)
}
