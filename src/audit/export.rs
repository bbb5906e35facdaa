//! Exporting the journal as JSON lines that anyone can re-check without the key (docs/design.md
//! §9). Each line is `{"v":2,"prev":"<hex>","hash":"<hex>",` followed by the row's canonical
//! text after its opening brace: the line is the canonical row with three members put in front,
//! so a verifier hashes `prev ‖ "{" ‖ the rest of the line` as it reads it, with nothing to
//! re-serialise. The first format (`{"seq","ts","kind","session","action","body","prev","hash"}`,
//! no `v`) still verifies, and a row whose stored body is not JSON is written in it (its body as a
//! string, which fails to verify), so every line stays JSON.
use super::verify::{Head, RowRef};
use super::{write_canonical_row, StoredRow, EXPORT_V2_PREFIX};
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

/// A row in the first format, keys in this order: only for a row whose body is not JSON.
#[derive(Serialize)]
struct Line<'a> {
    seq: i64,
    ts: &'a str,
    kind: &'a str,
    session: Option<&'a str>,
    action: Option<&'a str>,
    /// The stored text as a JSON string.
    body: &'a str,
    prev: String,
    hash: String,
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
    let (mut canonical, mut line) = (String::with_capacity(512), String::with_capacity(1024));
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
        let row = RowRef {
            seq,
            ts: &ts,
            kind: &kind,
            session: session.as_deref(),
            action: action.as_deref(),
            body: &body,
            prev: &prev,
            hash: &hash,
        };
        // The stored body text, unchanged, so the export hashes exactly as the database does.
        let written = if serde_json::from_str::<&RawValue>(&body).is_ok() {
            write_canonical_row(&mut canonical, &row);
            line.clear();
            line.push_str(EXPORT_V2_PREFIX);
            line.push_str(&hex::encode(&prev));
            line.push_str(r#"","hash":""#);
            line.push_str(&hex::encode(&hash));
            line.push_str(r#"","#);
            line.push_str(&canonical[1..]);
            line.push('\n');
            out.write_all(line.as_bytes())
        } else {
            // A damaged row: its body kept as a string, in the first format; it fails to verify.
            let old = Line {
                seq,
                ts: &ts,
                kind: &kind,
                session: session.as_deref(),
                action: action.as_deref(),
                body: &body,
                prev: hex::encode(&prev),
                hash: hex::encode(&hash),
            };
            serde_json::to_writer(&mut *out, &old)
                .map_err(std::io::Error::from)
                .and_then(|()| out.write_all(b"\n"))
        };
        written.map_err(write_err)?;
        exported.rows += 1;
        if let Ok(hash) = <[u8; 32]>::try_from(hash) {
            exported.head = Some(Head { seq, hash });
        }
    }
    out.flush().map_err(write_err)?;
    Ok(exported)
}
