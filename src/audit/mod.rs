//! The audit journal: appending blake3-chained rows inside the caller's transaction.
//!
//! Byte layout (also in ARCHITECTURE.md, so any tool can re-check it):
//! `genesis = blake3("agent-vault audit genesis v1\n" ‖ vault_id)`;
//! `canonical = canonical_json({"action","body","kind","seq","session","ts"})` with `null` for an
//! absent session or action; `hash = blake3(prev ‖ canonical)` where `prev` is the previous row's
//! 32-byte hash (the genesis for seq 1). Bodies never hold a secret or raw request bytes.
use crate::canonical;
use crate::store::{get_meta, StoreError};
use rusqlite::{params, OptionalExtension, Transaction};
use serde_json::{json, Value};

const GENESIS_TAG: &[u8] = b"agent-vault audit genesis v1\n";

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

/// Appends one row inside `tx` (which must be a write transaction, e.g. `Store::write`), so the
/// row commits or rolls back with the state change it records.
pub fn append(
    tx: &Transaction<'_>,
    kind: &str,
    session: Option<&str>,
    action: Option<&str>,
    body: &Value,
) -> Result<Appended, AuditError> {
    let head: Option<(i64, Vec<u8>)> = tx
        .query_row(
            "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let (seq, prev) = match head {
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
    tx.execute(
        "INSERT INTO audit (seq, ts, kind, session_id, action_id, body, prev, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![seq, ts, kind, session, action, canonical::to_string(body), &prev[..], &hash[..]],
    )?;
    Ok(Appended { seq, hash })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::MasterKey;
    use crate::store::{set_meta, Store};

    fn store(tag: &str) -> Store {
        let dir = std::env::temp_dir().join(format!("av-audit-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut s = Store::create(&dir.join("vault.db"), &MasterKey::generate()).unwrap();
        let tx = s.write().unwrap();
        set_meta(&tx, "vault_id", "vlt_test").unwrap();
        tx.commit().unwrap();
        s
    }

    #[test]
    fn rows_chain_from_the_genesis_of_the_vault_id() {
        let mut s = store("chain");
        let tx = s.write().unwrap();
        let a = append(&tx, "vault.init", None, None, &json!({"b": 1, "a": "x"})).unwrap();
        let b = append(&tx, "credential.add", Some("ses_1"), None, &json!({})).unwrap();
        tx.commit().unwrap();
        assert_eq!((a.seq, b.seq), (1, 2));
        #[allow(clippy::type_complexity)]
        let rows: Vec<(
            i64,
            String,
            String,
            Option<String>,
            String,
            Vec<u8>,
            Vec<u8>,
        )> = s
            .conn()
            .prepare("SELECT seq, ts, kind, session_id, body, prev, hash FROM audit ORDER BY seq")
            .unwrap()
            .query_map([], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                ))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(rows[0].4, r#"{"a":"x","b":1}"#);
        let mut prev = genesis("vlt_test");
        for (seq, ts, kind, session, body, stored_prev, hash) in rows {
            assert_eq!(stored_prev, prev);
            let body: Value = serde_json::from_str(&body).unwrap();
            let row = canonical_row(seq, &ts, &kind, session.as_deref(), None, &body);
            assert_eq!(hash, row_hash(&prev, &row));
            prev = hash.try_into().unwrap();
        }
    }

    #[test]
    fn a_rolled_back_transaction_leaves_no_row() {
        let mut s = store("rollback");
        {
            let tx = s.write().unwrap();
            append(&tx, "x", None, None, &json!({})).unwrap();
        }
        let n: i64 = s
            .conn()
            .query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0);
    }

    #[test]
    fn genesis_depends_on_the_vault() {
        assert_ne!(genesis("a"), genesis("b"));
    }
}
