//! The approvals side of signatures: a database is refused when it names another approver key
//! than the one `vault.key.age` holds (`Trust::check_store`). Signing and checking signatures
//! is `keys::signing`'s, re-exported here; the nonce each approver payload carries is
//! `random_hex`.
use crate::store::{get_meta, StoreError};
use crate::wire::journal::{Kind, VaultInit};
use ed25519_dalek::VerifyingKey;
use rusqlite::Connection;

pub use crate::keys::signing::*;

/// A fresh 128-bit nonce, hex: what makes each signed approver payload single-use.
pub(super) fn random_hex() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random number generator failed");
    hex::encode(b)
}

impl Trust {
    /// Refuses a database whose vault id, `meta.approver_public_key` or first journal row
    /// (`vault.init`) names another key than the trusted one: a database writer cannot swap in a
    /// key of their own.
    pub fn check_store(&self, conn: &Connection) -> Result<(), StoreError> {
        let recorded = approver_public_key(conn)?;
        if recorded != self.approver {
            return Err(StoreError::Damaged(
                "the approver public key in the database is not the one in vault.key.age (someone replaced it); restore vault.db from a backup",
            ));
        }
        if get_meta(conn, "vault_id")?.as_deref() != Some(self.vault_id.as_str()) {
            return Err(StoreError::Damaged(
                "vault.db belongs to another vault than vault.key.age",
            ));
        }
        Ok(())
    }
}

/// The approver's public key as recorded at `vault init`: `meta.approver_public_key`, which must
/// agree with the body of journal row 1 (`vault.init`).
fn approver_public_key(conn: &Connection) -> Result<VerifyingKey, StoreError> {
    let from_meta = get_meta(conn, "approver_public_key")?.unwrap_or_default();
    let from_journal: Option<String> = conn
        .query_row(
            "SELECT body FROM audit WHERE seq = 1 AND kind = ?1",
            [Kind::VaultInit.as_str()],
            |r| r.get(0),
        )
        .ok()
        .and_then(|b: String| serde_json::from_str::<VaultInit>(&b).ok())
        .map(|v| v.approver_public_key);
    let bad = || {
        StoreError::Damaged(
            "the approver public key in meta does not match the journal's first row",
        )
    };
    if from_journal.as_deref() != Some(from_meta.as_str()) {
        return Err(bad());
    }
    let bytes: [u8; 32] = hex::decode(&from_meta)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(bad)?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| bad())
}
