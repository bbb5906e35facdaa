//! Numbered migrations from `schema/`, embedded at build time and applied in one transaction.
use super::{Store, StoreError};
use rusqlite::TransactionBehavior;

/// Every migration, in order: (version, name, SQL). Files are never edited once they land.
pub const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "0001_init", include_str!("../../schema/0001_init.sql")),
    (
        2,
        "0002_actions",
        include_str!("../../schema/0002_actions.sql"),
    ),
    (
        3,
        "0003_decisions",
        include_str!("../../schema/0003_decisions.sql"),
    ),
    (
        4,
        "0004_journal_indexes",
        include_str!("../../schema/0004_journal_indexes.sql"),
    ),
    (
        5,
        "0005_actions_by_credential",
        include_str!("../../schema/0005_actions_by_credential.sql"),
    ),
    (
        6,
        "0006_narrower_writes",
        include_str!("../../schema/0006_narrower_writes.sql"),
    ),
    (
        7,
        "0007_fewer_index_pages",
        include_str!("../../schema/0007_fewer_index_pages.sql"),
    ),
    (
        8,
        "0008_grant_rows",
        include_str!("../../schema/0008_grant_rows.sql"),
    ),
    (
        9,
        "0009_network_actions",
        include_str!("../../schema/0009_network_actions.sql"),
    ),
];

/// The schema version this binary writes.
pub const LATEST_SCHEMA: i64 = MIGRATIONS[MIGRATIONS.len() - 1].0;

impl Store {
    /// Applies every migration newer than the recorded version, all in one transaction.
    pub(super) fn migrate(&mut self) -> Result<(), StoreError> {
        // The common case, a current schema, costs one read and no write lock.
        if self.recorded_version()? == LATEST_SCHEMA {
            return Ok(());
        }
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                 version    INTEGER PRIMARY KEY,
                 name       TEXT NOT NULL,
                 applied_at TEXT NOT NULL
             ) STRICT;",
        )?;
        let current: i64 = tx.query_row(
            "SELECT coalesce(max(version), 0) FROM schema_migrations",
            [],
            |r| r.get(0),
        )?;
        if current > LATEST_SCHEMA {
            return Err(StoreError::NewerSchema {
                found: current,
                known: LATEST_SCHEMA,
            });
        }
        for (version, name, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
            tx.execute_batch(sql)?;
            tx.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)",
                rusqlite::params![version, name, crate::time::now_utc()],
            )?;
            tracing::debug!(version, name, "applied migration");
        }
        tx.commit()?;
        Ok(())
    }

    /// The version recorded in `schema_migrations`, 0 for a new file.
    fn recorded_version(&self) -> Result<i64, StoreError> {
        let has_table: bool = self.conn.query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'",
            [],
            |r| r.get(0),
        )?;
        if !has_table {
            return Ok(0);
        }
        let v: i64 = self.conn.query_row(
            "SELECT coalesce(max(version), 0) FROM schema_migrations",
            [],
            |r| r.get(0),
        )?;
        if v > LATEST_SCHEMA {
            return Err(StoreError::NewerSchema {
                found: v,
                known: LATEST_SCHEMA,
            });
        }
        Ok(v)
    }
}
