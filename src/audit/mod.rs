//! The audit journal: appending blake3-chained rows inside the caller's transaction; verifying,
//! exporting and anchoring the chain; and the Activity / Sessions projections of it.
//!
//! Byte layout (also in docs/design.md §9, so any tool can re-check it):
//! `genesis = blake3("agent-vault audit genesis v1\n" ‖ vault_id)`;
//! `canonical = canonical_json({"action","body","kind","seq","session","ts"})` with `null` for an
//! absent session or action; `hash = blake3(prev ‖ canonical)` where `prev` is the previous row's
//! 32-byte hash (the genesis for seq 1). Bodies never hold a secret or raw request bytes.
/// `SELECT` of every journal column, in `StoredRow` order, with the rest of the query appended:
/// the one place the journal's columns are listed for reading.
macro_rules! journal_select {
    ($($rest:literal)?) => {
        concat!(
            "SELECT seq, ts, kind, session_id, action_id, body, prev, hash FROM audit",
            $(" ", $rest)?
        )
    };
}
pub(crate) use journal_select;

mod activity;
mod anchor;
mod export;
mod verify;

pub use activity::{ActionEntry, Activity, SessionSummary};
pub use anchor::{
    last_anchor, last_anchored_seq, maybe_anchor, parse_anchor, read_anchors, write_anchor, Anchor,
    AnchorError, ANCHOR_EVERY,
};
pub use export::{export, export_to, ExportError, Exported};
pub use verify::{
    verify_file, verify_file_with, verify_store, verify_store_parallel, verify_store_with, Facts,
    Failure, Head, Reason, Report, RowRef, Signatures, Transitions, Verifier, VerifyError,
    CHUNK_ROWS as VERIFY_CHUNK_ROWS,
};

use crate::canonical;
use crate::store::{get_meta, StoreError};
use crate::wire::journal::{Body, CallRejected};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

/// A journal row as stored, read by a `journal_select!` query.
#[derive(Debug, Clone)]
pub(crate) struct StoredRow {
    pub(crate) seq: i64,
    pub(crate) ts: String,
    pub(crate) kind: String,
    pub(crate) session: Option<String>,
    pub(crate) action: Option<String>,
    /// The canonical JSON text, as hashed.
    pub(crate) body: String,
    pub(crate) prev: Vec<u8>,
    pub(crate) hash: Vec<u8>,
}

impl StoredRow {
    pub(crate) fn from_sql(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            seq: r.get(0)?,
            ts: r.get(1)?,
            kind: r.get(2)?,
            session: r.get(3)?,
            action: r.get(4)?,
            body: r.get(5)?,
            prev: r.get(6)?,
            hash: r.get(7)?,
        })
    }
}

const GENESIS_TAG: &[u8] = b"agent-vault audit genesis v1\n";

/// What each line of the export's current format (version 2) starts with: `export` writes it,
/// `verify --file` reads a line without it in the first format (docs/design.md §9).
pub(crate) const EXPORT_V2_PREFIX: &str = r#"{"v":2,"prev":""#;

/// Errors appending to the journal.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("the journal cannot be appended to: the vault id is missing from the database; restore vault.db from a backup")]
    NoVaultId,
    #[error("journal head is damaged at seq {0}; run `vault verify` to see what changed")]
    BadHead(i64),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("database error appending to the journal: {0}")]
    Sql(#[from] rusqlite::Error),
}

/// The previous hash of the first row of a vault's journal.
pub fn genesis(vault_id: &str) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(GENESIS_TAG);
    h.update(vault_id.as_bytes());
    *h.finalize().as_bytes()
}

/// The canonical bytes of a row, as hashed.
pub fn canonical_row(
    seq: i64,
    ts: &str,
    kind: &str,
    session: Option<&str>,
    action: Option<&str>,
    body: &Value,
) -> String {
    canonical::to_string(&json!({
        "action": action,
        "body": body,
        "kind": kind,
        "seq": seq,
        "session": session,
        "ts": ts,
    }))
}

/// Writes `canonical_row` into `buf` from a row as stored, without parsing its body: the body's
/// stored text is used as is, so a body that is not byte-for-byte canonical no longer hashes to
/// the stored hash. Equal to `canonical_row` for a canonical body (tested).
pub(crate) fn write_canonical_row(buf: &mut String, row: &RowRef<'_>) {
    buf.clear();
    put_canonical_row(buf, row);
}

/// Where a canonical row is written: a `String`, or bytes after a row's `prev` (the verifier
/// hashes `prev ‖ canonical row` in one call, as the per-row peer of its bench does).
pub(crate) trait Out {
    fn put(&mut self, s: &str);
}

impl Out for String {
    fn put(&mut self, s: &str) {
        self.push_str(s);
    }
}

impl Out for Vec<u8> {
    fn put(&mut self, s: &str) {
        self.extend_from_slice(s.as_bytes());
    }
}

/// `write_canonical_row` appending to what `out` holds.
pub(crate) fn put_canonical_row(out: &mut impl Out, row: &RowRef<'_>) {
    out.put("{\"action\":");
    write_opt_str(out, row.action);
    out.put(",\"body\":");
    out.put(row.body);
    out.put(",\"kind\":");
    write_json_str(out, row.kind);
    out.put(",\"seq\":");
    push_decimal(out, row.seq);
    out.put(",\"session\":");
    write_opt_str(out, row.session);
    out.put(",\"ts\":");
    write_json_str(out, row.ts);
    out.put("}");
}

/// `n` in decimal, as JSON and `Display` write it, without going through `fmt` (the verifier
/// writes one per row).
fn push_decimal(out: &mut impl Out, n: i64) {
    if n < 0 {
        out.put("-");
    }
    let mut digits = [0u8; 20];
    let (mut at, mut v) = (digits.len(), n.unsigned_abs());
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.put(std::str::from_utf8(&digits[at..]).expect("ASCII digits"));
}

fn write_opt_str(out: &mut impl Out, s: Option<&str>) {
    match s {
        Some(s) => write_json_str(out, s),
        None => out.put("null"),
    }
}

/// A JSON string escaped as `canonical` escapes it.
pub(crate) fn write_json_str(out: &mut impl Out, s: &str) {
    // Without an early exit, so that it compiles to a vector loop (the verifier writes four per row).
    let plain = !s.bytes().fold(false, |any, b| {
        any | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if plain {
        out.put("\"");
        out.put(s);
        out.put("\"");
    } else {
        out.put(&canonical::to_string(&Value::String(s.to_owned())));
    }
}

/// `blake3(prev ‖ canonical_row)`.
pub fn row_hash(prev: &[u8; 32], canonical_row: &str) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(prev);
    h.update(canonical_row.as_bytes());
    *h.finalize().as_bytes()
}

/// What was appended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    pub seq: i64,
    pub hash: [u8; 32],
}

/// The journal's last row: its seq and stored hash (`None` before the first row).
pub(crate) fn head(conn: &Connection) -> rusqlite::Result<Option<(i64, Vec<u8>)>> {
    conn.prepare_cached("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1")?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
}

/// Exactly 64 lowercase hex digits (as the journal, exports and anchors write a hash), decoded.
/// `vault verify --file` decodes two per row: each digit's value and whether it is one are
/// computed, not looked up, with no early exit, so that both loops compile to vector code (a
/// table lookup per digit was ~6% of the time).
pub(crate) fn hex32(s: &str) -> Option<[u8; 32]> {
    let digits: &[u8; 64] = s.as_bytes().try_into().ok()?;
    let mut values = [0u8; 64];
    let mut bad = false;
    for (v, &c) in values.iter_mut().zip(digits) {
        let (digit, letter) = (c.wrapping_sub(b'0'), c.wrapping_sub(b'a'));
        bad |= (digit >= 10) & (letter >= 6);
        *v = if digit < 10 {
            digit
        } else {
            letter.wrapping_add(10)
        };
    }
    let mut out = [0u8; 32];
    for (o, [hi, lo]) in out.iter_mut().zip(values.as_chunks::<2>().0) {
        *o = hi << 4 | lo;
    }
    (!bad).then_some(out)
}

/// Appends one row inside `tx` (which must be a write transaction, e.g. `Store::write`), so the
/// row commits or rolls back with the state change it records. The body's type names its kind.
pub fn append<B: Body>(
    tx: &Connection,
    session: Option<&str>,
    action: Option<&str>,
    body: &B,
) -> Result<Appended, AuditError> {
    let value = serde_json::to_value(body).expect("a journal body always serializes");
    append_row(tx, body.kind().as_str(), session, action, &value)
}

/// A row of any kind and body, for tests and tools that build a journal by hand; the vault
/// itself appends typed bodies (`append`), so every row it writes has its kind's shape.
pub fn append_row(
    tx: &Connection,
    kind: &str,
    session: Option<&str>,
    action: Option<&str>,
    body: &Value,
) -> Result<Appended, AuditError> {
    let (seq, prev) = match head(tx)? {
        Some((seq, hash)) => {
            let prev: [u8; 32] = hash.try_into().map_err(|_| AuditError::BadHead(seq))?;
            (seq + 1, prev)
        }
        None => {
            let id = get_meta(tx, "vault_id")?.ok_or(AuditError::NoVaultId)?;
            (1, genesis(&id))
        }
    };
    let ts = crate::time::now_utc();
    let row = canonical_row(seq, &ts, kind, session, action, body);
    let hash = row_hash(&prev, &row);
    tx.prepare_cached(
        "INSERT INTO audit (seq, ts, kind, session_id, action_id, body, prev, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![seq, ts, kind, session, action, canonical::to_string(body), &prev[..], &hash[..]])?;
    Ok(Appended { seq, hash })
}

/// Journals a call that was refused before it became an action (`call.rejected`). The request
/// itself is never stored, only its blake3 fingerprint (`fingerprint`, computed by whoever read
/// the bytes), so a rejected call leaves no state behind
/// and can never be mistaken for an action that failed (those are `action.*` rows).
pub fn record_rejection(
    tx: &Connection,
    session: Option<&str>,
    code: i64,
    reason: &str,
    fingerprint: &str,
    tool: Option<&str>,
) -> Result<Appended, AuditError> {
    let body = CallRejected {
        code,
        reason: reason.to_owned(),
        fingerprint: fingerprint.to_owned(),
        tool: tool.map(str::to_owned),
    };
    append(tx, session, None, &body)
}

#[cfg(test)]
mod basis_tests;
#[cfg(test)]
pub(crate) mod proptests;
#[cfg(test)]
mod tests;
