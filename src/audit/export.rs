//! Exporting the journal as JSON lines that anyone can re-check without the key:
//! `{"seq","ts","kind","session","action","body","prev","hash"}`, body as the stored canonical
//! JSON object, hashes as lowercase hex.
use super::verify::Head;
use super::write_json_str;
use crate::paths::{self, PathError};
use rusqlite::Connection;
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
    let mut stmt = conn.prepare(
        "SELECT seq, ts, kind, session_id, action_id, body, prev, hash FROM audit ORDER BY seq",
    )?;
    let mut rows = stmt.query([])?;
    let mut line = String::with_capacity(1024);
    let mut exported = Exported {
        rows: 0,
        head: None,
    };
    while let Some(r) = rows.next()? {
        let seq: i64 = r.get(0)?;
        let (ts, kind): (String, String) = (r.get(1)?, r.get(2)?);
        let (session, action): (Option<String>, Option<String>) = (r.get(3)?, r.get(4)?);
        let body: String = r.get(5)?;
        let (prev, hash): (Vec<u8>, Vec<u8>) = (r.get(6)?, r.get(7)?);
        line.clear();
        line.push_str("{\"seq\":");
        line.push_str(&seq.to_string());
        line.push_str(",\"ts\":");
        write_json_str(&mut line, &ts);
        line.push_str(",\"kind\":");
        write_json_str(&mut line, &kind);
        for (key, v) in [(",\"session\":", &session), (",\"action\":", &action)] {
            line.push_str(key);
            match v {
                Some(s) => write_json_str(&mut line, s),
                None => line.push_str("null"),
            }
        }
        line.push_str(",\"body\":");
        // The stored canonical text, unchanged, so the export hashes exactly as the database
        // does; a body that is not JSON (a damaged row) is kept as a string, and fails to verify.
        if serde_json::from_str::<&serde_json::value::RawValue>(&body).is_ok() {
            line.push_str(&body);
        } else {
            write_json_str(&mut line, &body);
        }
        line.push_str(",\"prev\":\"");
        line.push_str(&hex::encode(&prev));
        line.push_str("\",\"hash\":\"");
        line.push_str(&hex::encode(&hash));
        line.push_str("\"}\n");
        out.write_all(line.as_bytes()).map_err(write_err)?;
        exported.rows += 1;
        if let Ok(hash) = <[u8; 32]>::try_from(hash) {
            exported.head = Some(Head { seq, hash });
        }
    }
    let file = out.into_inner().map_err(|e| write_err(e.into_error()))?;
    file.sync_all().map_err(write_err)?;
    Ok(exported)
}
