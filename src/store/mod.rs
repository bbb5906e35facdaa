//! The SQLCipher database: opening it with the raw master key, applying the numbered migrations
//! of `schema/`, and typed access to its rows. No JSON-RPC, no CLI, no network here.
mod credentials;
mod format;
mod migrate;

pub use credentials::CredentialRow;
use format::PageFormat;
pub use format::PAGE_FORMAT_PRAGMAS;
pub use migrate::{LATEST_SCHEMA, MIGRATIONS};

use crate::keys::MasterKey;
use rusqlite::config::DbConfig;
use rusqlite::{Connection, ErrorCode, OpenFlags, Savepoint, Transaction, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a writer waits for another process's transaction before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("no vault database at {0}; run `vault init` (or point --vault-dir / VAULT_DIR at your vault)")]
    Missing(PathBuf),
    #[error("{0} cannot be opened with this key: the key belongs to another vault, or the file is corrupt or not a vault database. Run `vault lock` then `vault unlock` to reload the key from vault.key.age; if that fails, restore vault.db from a backup")]
    WrongKeyOrNotVault(PathBuf),
    #[error("{0} is a plain, unencrypted SQLite file, not a vault database; move it away and run `vault init`")]
    Plaintext(PathBuf),
    #[error("vault.db has schema version {found}, newer than this binary knows ({known}); install a newer agent-vault")]
    NewerSchema { found: i64, known: i64 },
    #[error("the database is busy (another vault process holds a write lock for over {}s); retry, or look for a stuck process", BUSY_TIMEOUT.as_secs())]
    Busy,
    #[error("vault.db is damaged: {0}; run `vault verify`, and restore vault.db from a backup")]
    Damaged(&'static str),
    #[error("{0} is in the previous page format and another process has it open or locked, so it cannot be converted now; stop that process (an agent of the previous version: `vault lock` with that version) and retry")]
    LegacyInUse(PathBuf),
    #[error("could not convert vault.db to the current page format: {0}; vault.db is unchanged, retry once the cause is fixed")]
    Convert(String),
    #[error("database error: {0}")]
    Sql(#[from] rusqlite::Error),
}

impl StoreError {
    fn from_sql(e: rusqlite::Error, path: &Path) -> Self {
        match e.sqlite_error_code() {
            Some(ErrorCode::NotADatabase) => StoreError::WrongKeyOrNotVault(path.to_owned()),
            Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => StoreError::Busy,
            _ => StoreError::Sql(e),
        }
    }
}

/// An open vault database.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// The key this connection was opened with (SQLCipher holds it for the connection's lifetime
    /// anyway), for the extra read-only connections of `reader`.
    key: MasterKey,
    /// Inside `begin_batch` … `commit_batch`: `write` hands out savepoints of the batch's one
    /// transaction (group commit: one fsync for the rows of many callers).
    in_batch: bool,
}

/// A connection to `path` keyed with `key` (raw, no KDF) in page format `format`, with the busy
/// timeout set; a wrong key or format shows only at the first read.
/// SQLite's first initialization marks itself done before SQLCipher's own start-up (its crypto
/// provider) has run: a thread whose first connection raced another's found SQLite initialized,
/// SQLCipher not, and failed its `PRAGMA key` ("An error occurred with PRAGMA key or rekey…",
/// about 1 process in 150 when 32 threads open at once; tests/audit_concurrency.rs). One
/// connection, opened once per process before any other, finishes both; the others wait for it.
fn sqlcipher_started() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| drop(Connection::open_in_memory()));
}

fn keyed(
    path: &Path,
    flags: OpenFlags,
    key: &MasterKey,
    format: PageFormat,
) -> Result<Connection, StoreError> {
    sqlcipher_started();
    let conn =
        Connection::open_with_flags(path, flags).map_err(|e| StoreError::from_sql(e, path))?;
    // SQLCipher logs to stderr on a bad key; we report errors ourselves.
    let _ = conn.execute_batch("PRAGMA cipher_log_level = NONE;");
    let pragma = zeroize::Zeroizing::new(format!("PRAGMA key = \"x'{}'\";", key.to_hex().as_str()));
    conn.execute_batch(&pragma)
        .map_err(|e| StoreError::from_sql(e, path))?;
    format
        .apply(&conn)
        .map_err(|e| StoreError::from_sql(e, path))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| StoreError::from_sql(e, path))?;
    // Plans that do not depend on the values bound. Without this, SQLite marks a statement to
    // be re-prepared when a value bound to a filter term changes, and rusqlite's statement cache
    // clears the bindings of every statement it takes back: every statement with such a term was
    // parsed and planned again on every run.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(|e| StoreError::from_sql(e, path))?;
    Ok(conn)
}

/// A write transaction: a real `BEGIN IMMEDIATE` transaction, or, inside a group-commit batch, a
/// savepoint of the batch's transaction (its `commit` releases the savepoint; the batch's
/// commit makes it durable). Dropped without `commit`, either rolls back.
pub enum Tx<'a> {
    Top(Transaction<'a>),
    Nested(Savepoint<'a>),
}

impl std::ops::Deref for Tx<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        match self {
            Tx::Top(t) => t,
            Tx::Nested(s) => s,
        }
    }
}

impl Tx<'_> {
    pub fn commit(self) -> Result<(), StoreError> {
        match self {
            Tx::Top(t) => t.commit(),
            Tx::Nested(s) => s.commit(),
        }
        .map_err(StoreError::from)
    }
}

impl Store {
    /// Creates the database in an existing, empty (0600) file and applies all migrations.
    pub fn create(path: &Path, key: &MasterKey) -> Result<Self, StoreError> {
        let mut store = Self::open_inner(path, key, true)?;
        store.migrate()?;
        Ok(store)
    }

    /// Opens an existing database and brings its schema up to date.
    pub fn open(path: &Path, key: &MasterKey) -> Result<Self, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing(path.to_owned()));
        }
        let mut store = Self::open_inner(path, key, false)?;
        store.migrate()?;
        Ok(store)
    }

    fn open_inner(path: &Path, key: &MasterKey, create: bool) -> Result<Self, StoreError> {
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let mut conn = keyed(path, flags, key, PageFormat::Current)?;
        // A wrong key only shows at the first read. So does a file in the previous page format,
        // which is converted once, here, and opened again.
        if let Err(e) = format::readable(&conn) {
            if is_plaintext_sqlite(path) {
                return Err(StoreError::Plaintext(path.to_owned()));
            }
            if create || e.sqlite_error_code() != Some(ErrorCode::NotADatabase) {
                return Err(StoreError::from_sql(e, path));
            }
            drop(conn);
            format::convert_legacy(path, key)?;
            conn = keyed(path, flags, key, PageFormat::Current)?;
            format::readable(&conn).map_err(|e| StoreError::from_sql(e, path))?;
        }
        // WAL: readers never block the writer. synchronous=FULL: a committed row (an intent row in
        // particular) is on disk before the caller goes on.
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;",
        )
        .map_err(|e| StoreError::from_sql(e, path))?;
        // Every statement of a call's path stays prepared (rusqlite keeps 16 by default; the
        // agent's hot path alone uses more, and parsing SQL was a tenth of its writer's time).
        conn.set_prepared_statement_cache_capacity(64);
        Ok(Self {
            conn,
            path: path.to_owned(),
            key: key.clone(),
            in_batch: false,
        })
    }

    /// Another connection to the same database, read-only (for readers on other threads, such as
    /// the verifier's workers). Its schema is this one's: no migration runs.
    pub fn reader(&self) -> Result<Connection, StoreError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        keyed(&self.path, flags, &self.key, PageFormat::Current)
    }

    /// A write transaction that takes the write lock up front (`BEGIN IMMEDIATE`), so concurrent
    /// writers queue on the busy timeout instead of failing at commit. Inside a batch, a
    /// savepoint of the batch's transaction.
    pub fn write(&mut self) -> Result<Tx<'_>, StoreError> {
        if self.in_batch {
            return Ok(Tx::Nested(self.conn.savepoint()?));
        }
        let path = self.path.clone();
        self.conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map(Tx::Top)
            .map_err(|e| StoreError::from_sql(e, &path))
    }

    /// `synchronous = FULL` (each commit fsyncs the WAL) or `NORMAL` (commits reach the OS page
    /// cache; the WAL is fsynced at checkpoints). Only between transactions.
    pub fn set_synchronous(&mut self, full: bool) -> Result<(), StoreError> {
        let sql = if full {
            "PRAGMA synchronous = FULL"
        } else {
            "PRAGMA synchronous = NORMAL"
        };
        self.conn
            .execute_batch(sql)
            .map_err(|e| StoreError::from_sql(e, &self.path))
    }

    /// Starts a group-commit batch: until `commit_batch` or `rollback_batch`, every `write` is a
    /// savepoint of this one transaction.
    pub fn begin_batch(&mut self) -> Result<(), StoreError> {
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(|e| StoreError::from_sql(e, &self.path))?;
        self.in_batch = true;
        Ok(())
    }

    /// Commits the batch: every savepoint released inside it becomes durable at once.
    pub fn commit_batch(&mut self) -> Result<(), StoreError> {
        self.in_batch = false;
        if let Err(e) = self.conn.execute_batch("COMMIT") {
            let _ = self.conn.execute_batch("ROLLBACK");
            return Err(StoreError::from_sql(e, &self.path));
        }
        Ok(())
    }

    /// Read access.
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A value of the `meta` table.
    pub fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        get_meta(&self.conn, key)
    }

    /// The schema version recorded by the last migration.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        Ok(self.conn.query_row(
            "SELECT coalesce(max(version), 0) FROM schema_migrations",
            [],
            |r| r.get(0),
        )?)
    }

    /// The SQLCipher library version, for `vault doctor`.
    pub fn cipher_version(&self) -> Result<String, StoreError> {
        Ok(self
            .conn
            .query_row("PRAGMA cipher_version", [], |r| r.get(0))?)
    }
}

/// Reads a `meta` value inside any connection or transaction.
pub fn get_meta(conn: &Connection, key: &str) -> Result<Option<String>, StoreError> {
    use rusqlite::OptionalExtension;
    Ok(conn
        .prepare_cached("SELECT value FROM meta WHERE key = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()?)
}

/// Sets a `meta` value inside the caller's transaction.
pub fn set_meta(tx: &Connection, key: &str, value: &str) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        [key, value],
    )?;
    Ok(())
}

fn is_plaintext_sqlite(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .map(|()| &head == b"SQLite format 3\0")
        .unwrap_or(false)
}

/// A store in a fresh temp dir with `vault_id` set: the fixture of unit tests across modules.
#[cfg(test)]
pub(crate) fn test_store(tag: &str, vault_id: &str) -> Store {
    let dir = std::env::temp_dir().join(format!("av-unit-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut s = Store::create(&dir.join("vault.db"), &MasterKey::generate()).unwrap();
    let tx = s.write().unwrap();
    set_meta(&tx, "vault_id", vault_id).unwrap();
    tx.commit().unwrap();
    s
}

#[cfg(test)]
mod tests;
