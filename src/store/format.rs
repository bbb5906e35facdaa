//! The vault's page format (SQLCipher 4, pages MACed with HMAC-SHA256) and the one-time
//! conversion of a `vault.db` written in the previous format (SQLCipher 4's defaults, whose page
//! MAC is HMAC-SHA512) to it.
//!
//! Why a format of our own: every page written or read is MACed, and on the CPUs this runs on
//! SHA-256 is the hash with hardware help; the page MAC was the largest single cost of a commit
//! and of `vault verify` (docs/design.md §10, "Durability"). HMAC-SHA256 with a 256-bit key is
//! as strong a page MAC as the file needs. Everything else stays at SQLCipher 4's defaults, pinned
//! here so that a future SQLCipher with other defaults still opens the file.
use super::StoreError;
use crate::keys::MasterKey;
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What any SQLCipher 4 tool needs, after `PRAGMA key = "x'<master key>'";`, to open `vault.db`
/// (README, "Recovery"). The other settings are SQLCipher 4's defaults.
pub const PAGE_FORMAT_PRAGMAS: &str = "PRAGMA cipher_hmac_algorithm = HMAC_SHA256;";

/// The page format a connection reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PageFormat {
    /// HMAC-SHA256 page MACs: what this binary writes.
    Current,
    /// SQLCipher 4's defaults (HMAC-SHA512): files written before 2026-12; only read, to convert.
    Legacy,
}

impl PageFormat {
    /// The pragmas, run after `PRAGMA key` and before the first read. `schema` names an attached
    /// database, or is empty for the main one.
    fn pragmas(self, schema: &str) -> String {
        let hmac = match self {
            PageFormat::Current => "HMAC_SHA256",
            PageFormat::Legacy => "HMAC_SHA512",
        };
        let p = if schema.is_empty() {
            String::new()
        } else {
            format!("{schema}.")
        };
        format!(
            "PRAGMA {p}cipher_page_size = 4096; PRAGMA {p}cipher_kdf_algorithm = PBKDF2_HMAC_SHA512; \
             PRAGMA {p}cipher_hmac_algorithm = {hmac};"
        )
    }

    /// Sets this format on a freshly keyed connection.
    pub(super) fn apply(self, conn: &Connection) -> rusqlite::Result<()> {
        conn.execute_batch(&self.pragmas(""))
    }
}

/// Whether a connection reads its database: a wrong key or format shows only at the first read.
pub(super) fn readable(conn: &Connection) -> rusqlite::Result<()> {
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    })
    .map(drop)
}

/// Converts `path`, if it is a vault database in the legacy format that `key` opens, to the
/// current format: copied page by page into a new 0600 file beside it with `sqlcipher_export`
/// (every table, index and trigger; the rows and the journal unchanged), made durable, then
/// renamed over it. Nothing to do if the file is not in the legacy format under this key (a
/// wrong key, or converted by another process meanwhile): the caller's next open tells.
///
/// Safe against another process: converters take an exclusive `flock` of the file first (waiting
/// at most `BUSY_TIMEOUT`: a process that sits on the lock gets an error, not a hang) and look
/// again once they hold it; the legacy file is switched out of WAL mode before the copy,
/// which SQLite refuses while any other connection has it open (an agent of the previous
/// version, say), so nothing can write to it while it is copied. A crash before the rename
/// leaves the legacy file as it was; the half-written copy is removed by the next try.
pub(super) fn convert_legacy(path: &Path, key: &MasterKey) -> Result<(), StoreError> {
    let lock = std::fs::File::open(path).map_err(|e| io_error(path, e))?;
    take_lock(&lock, path)?;
    // Converted by another process while this one waited for the lock?
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if readable(&super::keyed(path, flags, key, PageFormat::Current)?).is_ok() {
        return Ok(());
    }
    let legacy = super::keyed(path, flags, key, PageFormat::Legacy)?;
    if readable(&legacy).is_err() {
        return Ok(());
    }
    legacy.busy_timeout(Duration::from_secs(2))?;
    // Out of WAL mode: checkpoints the WAL into the file and removes it (a stale `-wal` beside the
    // new file would be replayed into it), and fails if another connection has the file open.
    let mode: Result<String, _> =
        legacy.query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0));
    if !matches!(mode.as_deref(), Ok("delete")) {
        return Err(StoreError::LegacyInUse(path.to_owned()));
    }
    let tmp = sibling(path, ".format-new");
    match std::fs::remove_file(&tmp) {
        Ok(()) => tracing::info!(
            "removed {} left by an interrupted conversion",
            tmp.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_error(&tmp, e)),
    }
    {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| io_error(&tmp, e))?;
    }
    let tmp_str = tmp
        .to_str()
        .ok_or(StoreError::Damaged("the vault path is not UTF-8"))?;
    let raw_key = zeroize::Zeroizing::new(format!("x'{}'", key.to_hex().as_str()));
    legacy.execute(
        "ATTACH DATABASE ?1 AS current_format KEY ?2",
        rusqlite::params![tmp_str, raw_key.as_str()],
    )?;
    legacy.execute_batch(&PageFormat::Current.pragmas("current_format"))?;
    legacy.query_row("SELECT sqlcipher_export('current_format')", [], |_| Ok(()))?;
    legacy.execute_batch("DETACH DATABASE current_format")?;
    std::fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(|e| io_error(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io_error(path, e))?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_error(dir, e))?;
    }
    drop(legacy);
    tracing::info!(
        "{} converted to the HMAC-SHA256 page format (one time, rows unchanged)",
        path.display()
    );
    Ok(())
}

/// The exclusive flock of the file, waited for as long as a busy database is (another process
/// converting it); a process that holds it longer is refused, not waited on for ever.
fn take_lock(lock: &std::fs::File, path: &Path) -> Result<(), StoreError> {
    use rustix::fs::{flock, FlockOperation};
    let deadline = std::time::Instant::now() + super::BUSY_TIMEOUT;
    loop {
        match flock(lock, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(()),
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
                if std::time::Instant::now() >= deadline {
                    return Err(StoreError::LegacyInUse(path.to_owned()));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(io_error(path, e.into())),
        }
    }
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn io_error(path: &Path, e: std::io::Error) -> StoreError {
    StoreError::Convert(format!("{}: {e}", path.display()))
}
