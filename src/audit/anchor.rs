//! Anchors: heads of the chain (seq, hash) kept outside the database in `anchors.jsonl`, so a
//! history that was cut off or rewritten (even with its hashes recomputed) no longer matches.
use crate::paths::{self, PathError, VaultPaths};
use rusqlite::Connection;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

/// An anchor is written once the head is this many rows past the last anchor (and at the end of
/// every `vault mcp` session, by the MCP server calling `write_anchor`).
pub const ANCHOR_EVERY: i64 = 1000;

/// How much of the end of `anchors.jsonl` `maybe_anchor` reads to find the last anchor.
const TAIL_BYTES: u64 = 4096;

/// Errors reading or writing anchors.
#[derive(Debug, thiserror::Error)]
pub enum AnchorError {
    #[error("{0:?} is not an anchor; write it as SEQ:HASH, e.g. 42:<64 lowercase hex digits> (as `vault verify` prints the head)")]
    BadSpec(String),
    #[error("{path} line {line} is not an anchor ({detail}); the file was damaged or edited. Move it away to verify without it, and keep the heads you trust elsewhere")]
    BadLine {
        path: PathBuf,
        line: usize,
        detail: String,
    },
    #[error(
        "cannot append to {path}: {source}; check the vault directory's permissions and free space"
    )]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}; check its permissions")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("database error reading the journal head: {0}")]
    Sql(#[from] rusqlite::Error),
}

/// A head of the chain: the row at `seq` has hash `hash`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchor {
    pub seq: i64,
    pub hash: [u8; 32],
}

impl std::fmt::Display for Anchor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.seq, hex::encode(self.hash))
    }
}

fn parse_parts(seq: &str, hash: &str) -> Option<Anchor> {
    let seq: i64 = seq.parse().ok().filter(|s| *s >= 1)?;
    Some(Anchor {
        seq,
        hash: super::hex32(hash)?,
    })
}

/// Parses `SEQ:HASH` (the form `vault verify` prints).
pub fn parse_anchor(spec: &str) -> Result<Anchor, AnchorError> {
    let (seq, hash) = spec
        .trim()
        .split_once(':')
        .ok_or_else(|| AnchorError::BadSpec(spec.to_owned()))?;
    parse_parts(seq, &hash.to_ascii_lowercase())
        .ok_or_else(|| AnchorError::BadSpec(spec.to_owned()))
}

fn parse_line(line: &str) -> Result<Anchor, String> {
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let seq = v["seq"].as_i64().ok_or("no integer seq")?;
    let hash = v["hash"].as_str().ok_or("no hash")?;
    parse_parts(&seq.to_string(), hash).ok_or_else(|| "bad seq or hash".to_owned())
}

/// Appends `{"seq":N,"hash":"<hex>","ts":"…"}` to `anchors.jsonl` (created 0600) and syncs it.
/// Call it only after the transaction holding row `seq` has committed.
pub fn write_anchor(paths: &VaultPaths, seq: i64, hash: &[u8; 32]) -> Result<(), AnchorError> {
    let path = paths.anchors();
    let write_err = |source| AnchorError::Write {
        path: path.clone(),
        source,
    };
    let mut file = match paths::create_new_private(&path) {
        Ok(f) => f,
        Err(PathError::Exists { .. }) => std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(write_err)?,
        Err(e) => return Err(e.into()),
    };
    #[derive(serde::Serialize)]
    struct Line {
        seq: i64,
        hash: String,
        ts: String,
    }
    let mut line = serde_json::to_string(&Line {
        seq,
        hash: hex::encode(hash),
        ts: crate::time::now_utc(),
    })
    .expect("an anchor serializes");
    line.push('\n');
    // One write on an O_APPEND file: lines from concurrent processes do not interleave.
    file.write_all(line.as_bytes())
        .and_then(|()| file.sync_data())
        .map_err(write_err)
}

/// Every anchor in `anchors.jsonl` (none if the file does not exist).
pub fn read_anchors(paths: &VaultPaths) -> Result<Vec<Anchor>, AnchorError> {
    let path = paths.anchors();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(AnchorError::Read { path, source }),
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            parse_line(l).map_err(|detail| AnchorError::BadLine {
                path: path.clone(),
                line: i + 1,
                detail,
            })
        })
        .collect()
}

/// The last line of `anchors.jsonl` as written: the anchor and when it was written, if any.
/// `vault unlock` and `vault verify` show it, so a person can keep it off this machine (the only
/// way to notice a rollback of `vault.db` and `anchors.jsonl` together).
pub fn last_anchor(paths: &VaultPaths) -> Result<Option<(Anchor, String)>, AnchorError> {
    Ok(tail_lines(paths)?.into_iter().rev().find_map(|l| {
        let a = parse_line(&l).ok()?;
        let v: serde_json::Value = serde_json::from_str(&l).ok()?;
        Some((a, v["ts"].as_str().unwrap_or("?").to_owned()))
    }))
}

/// The lines of the last `TAIL_BYTES` of `anchors.jsonl` (the first may be cut; none if the
/// file does not exist).
fn tail_lines(paths: &VaultPaths) -> Result<Vec<String>, AnchorError> {
    let path = paths.anchors();
    let read_err = |source| AnchorError::Read {
        path: path.clone(),
        source,
    };
    let mut file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(read_err(e)),
    };
    let len = file.metadata().map_err(read_err)?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)))
        .map_err(read_err)?;
    let mut tail = Vec::with_capacity(TAIL_BYTES as usize);
    file.read_to_end(&mut tail).map_err(read_err)?;
    Ok(String::from_utf8_lossy(&tail)
        .lines()
        .map(str::to_owned)
        .collect())
}

/// The highest seq among the last lines of `anchors.jsonl` (0 if none).
pub fn last_anchored_seq(paths: &VaultPaths) -> Result<i64, AnchorError> {
    // The first line may be cut by the seek; a cut line simply does not parse.
    Ok(tail_lines(paths)?
        .iter()
        .filter_map(|l| parse_line(l).ok())
        .map(|a| a.seq)
        .max()
        .unwrap_or(0))
}

/// Anchors the committed head when it is `ANCHOR_EVERY` or more rows past the last anchor.
/// Cheap (one indexed read and the last 4 KiB of the file): call it after each commit.
pub fn maybe_anchor(paths: &VaultPaths, conn: &Connection) -> Result<Option<Anchor>, AnchorError> {
    let Some((seq, hash)) = super::head(conn)? else {
        return Ok(None);
    };
    let Ok(hash) = <[u8; 32]>::try_from(hash) else {
        return Ok(None);
    };
    if seq - last_anchored_seq(paths)? < ANCHOR_EVERY {
        return Ok(None);
    }
    write_anchor(paths, seq, &hash)?;
    Ok(Some(Anchor { seq, hash }))
}
