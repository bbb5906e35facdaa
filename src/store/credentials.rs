//! Rows of the `credentials` table. The secret column is only ever read by `secret()`.
use super::StoreError;
use rusqlite::{params, Connection, OptionalExtension, Row};
use zeroize::Zeroizing;

/// A credential as stored, without its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialRow {
    pub id: String,
    pub profile: String,
    pub name: String,
    pub kind: String,
    pub version: i64,
    pub approval: String,
    /// JSON of the binding and injection rules.
    pub target: String,
    pub created_at: String,
    pub updated_at: String,
}

const COLUMNS: &str = "id, profile, name, kind, version, approval, target, created_at, updated_at";

fn from_row(r: &Row<'_>) -> rusqlite::Result<CredentialRow> {
    Ok(CredentialRow {
        id: r.get(0)?,
        profile: r.get(1)?,
        name: r.get(2)?,
        kind: r.get(3)?,
        version: r.get(4)?,
        approval: r.get(5)?,
        target: r.get(6)?,
        created_at: r.get(7)?,
        updated_at: r.get(8)?,
    })
}

impl CredentialRow {
    /// Inserts a new credential with its secret.
    pub fn insert(&self, tx: &Connection, secret: &[u8]) -> Result<(), StoreError> {
        tx.execute(
            &format!("INSERT INTO credentials ({COLUMNS}, secret) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"),
            params![
                self.id,
                self.profile,
                self.name,
                self.kind,
                self.version,
                self.approval,
                self.target,
                self.created_at,
                self.updated_at,
                secret
            ],
        )?;
        Ok(())
    }

    /// Writes the row's approval, target, version and timestamp; the secret too when given.
    pub fn update(&self, tx: &Connection, secret: Option<&[u8]>) -> Result<(), StoreError> {
        tx.prepare_cached("UPDATE credentials SET version = ?2, approval = ?3, target = ?4, updated_at = ?5, policy_sig = NULL WHERE id = ?1")?.execute(params![self.id, self.version, self.approval, self.target, self.updated_at],
        )?;
        if let Some(secret) = secret {
            tx.prepare_cached("UPDATE credentials SET secret = ?2 WHERE id = ?1")?
                .execute(params![self.id, secret])?;
        }
        Ok(())
    }

    /// Deletes the row (and its secret).
    pub fn delete(&self, tx: &Connection) -> Result<(), StoreError> {
        tx.prepare_cached("DELETE FROM credentials WHERE id = ?1")?
            .execute([&self.id])?;
        Ok(())
    }

    /// The credential named `name` in `profile`.
    pub fn find(conn: &Connection, profile: &str, name: &str) -> Result<Option<Self>, StoreError> {
        Ok(conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM credentials WHERE profile = ?1 AND name = ?2"
            ))?
            .query_row([profile, name], from_row)
            .optional()?)
    }

    /// The credential with this id.
    pub fn find_by_id(conn: &Connection, id: &str) -> Result<Option<Self>, StoreError> {
        Ok(conn
            .prepare_cached(&format!("SELECT {COLUMNS} FROM credentials WHERE id = ?1"))?
            .query_row([id], from_row)
            .optional()?)
    }

    /// The approver's signature over the credential's policy, if any.
    pub fn policy_sig(conn: &Connection, id: &str) -> Result<Option<String>, StoreError> {
        Ok(conn
            .prepare_cached("SELECT policy_sig FROM credentials WHERE id = ?1")?
            .query_row([id], |r| r.get(0))
            .optional()?
            .flatten())
    }

    /// Stores (or clears) the policy signature.
    pub fn set_policy_sig(tx: &Connection, id: &str, sig: Option<&str>) -> Result<(), StoreError> {
        tx.prepare_cached("UPDATE credentials SET policy_sig = ?2 WHERE id = ?1")?
            .execute(params![id, sig])?;
        Ok(())
    }

    /// All credentials, or those of one profile, ordered by profile then name.
    pub fn list(conn: &Connection, profile: Option<&str>) -> Result<Vec<Self>, StoreError> {
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM credentials WHERE ?1 IS NULL OR profile = ?1 ORDER BY profile, name"
        ))?;
        let rows = stmt.query_map([profile], from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The profiles that hold at least one credential, in order.
    pub fn profiles(conn: &Connection) -> Result<Vec<String>, StoreError> {
        let mut stmt =
            conn.prepare_cached("SELECT DISTINCT profile FROM credentials ORDER BY profile")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The secret bytes, in a buffer wiped on drop.
    pub fn secret(&self, conn: &Connection) -> Result<Zeroizing<Vec<u8>>, StoreError> {
        Ok(Zeroizing::new(
            conn.prepare_cached("SELECT secret FROM credentials WHERE id = ?1")?
                .query_row([&self.id], |r| r.get::<_, Vec<u8>>(0))?,
        ))
    }
}
