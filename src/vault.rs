//! A vault directory as a whole: creating it (`init`), opening it with the cached key, and
//! moving the key in and out of the keyring (`unlock`, `lock`). Both adapters (CLI, MCP) open
//! vaults only through here, so they share every check.
use crate::audit;
use crate::keys::{
    unwrap_key_file, wrap_key_file, Backend, CacheError, KeyCache, KeyFileError, KeyMaterial,
    MasterKey, Passphrase,
};
use crate::paths::{self, PathError, VaultPaths};
use crate::store::{self, Store, StoreError};
use crate::Exit;
use serde_json::json;
use std::time::Duration;

/// Errors opening or changing a vault.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    #[error("no vault in {0}; run `vault init` (or point --vault-dir / VAULT_DIR at your vault)")]
    NotInitialized(String),
    #[error("{0} already holds a vault; use it, or choose another --vault-dir")]
    AlreadyInitialized(String),
    #[error("the vault in {0} is locked: its key is in no keyring. Run `vault unlock` (it asks for your passphrase), then try again")]
    Locked(String),
    #[error("vault.id names {id_file} but the database belongs to vault {db}; vault.id or vault.db was replaced. Restore the matching pair from a backup")]
    IdMismatch { id_file: String, db: String },
    #[error("{0} holds no vault id; restore it from a backup, or read the id with `age -d vault.key.age` and any SQLCipher tool")]
    BadIdFile(String),
    #[error(transparent)]
    KeyFile(#[from] KeyFileError),
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Path(#[from] PathError),
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
}

impl VaultError {
    /// The process exit code this error maps to (DESIGN §7).
    pub fn exit(&self) -> Exit {
        match self {
            VaultError::Locked(_) | VaultError::KeyFile(KeyFileError::WrongPassphrase) => {
                Exit::LockedOrPaused
            }
            _ => Exit::Failure,
        }
    }
}

/// An open vault.
#[derive(Debug)]
pub struct Vault {
    pub paths: VaultPaths,
    pub store: Store,
    pub vault_id: String,
    /// Where the master key came from.
    pub key_source: KeySource,
}

/// How this process got the master key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    Keyring(Backend),
    Passphrase,
}

impl std::fmt::Display for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeySource::Keyring(b) => write!(f, "{b}"),
            KeySource::Passphrase => f.write_str("passphrase (vault.key.age)"),
        }
    }
}

impl Vault {
    /// Creates a vault: a fresh master key and approver key, `vault.db` with the schema and its
    /// first journal row, `vault.key.age` under the passphrase, `vault.id`; caches the key.
    /// Files are created with `create_new`; on failure, what this call created is removed.
    pub fn init(
        paths: VaultPaths,
        passphrase: &Passphrase,
        ttl: Duration,
    ) -> Result<(Self, Option<Backend>), VaultError> {
        if paths.is_initialized() {
            return Err(VaultError::AlreadyInitialized(
                paths.dir().display().to_string(),
            ));
        }
        paths.create_dir()?;
        let keys = KeyMaterial::generate();
        let vault_id = crate::credentials::new_id("vlt");
        let key_file = wrap_key_file(&keys, passphrase)?;
        let created = [paths.db(), paths.key_file(), paths.id_file()];
        let result = (|| -> Result<Store, VaultError> {
            drop(paths::create_new_private(&paths.db())?);
            let mut store = Store::create(&paths.db(), &keys.master)?;
            let tx = store.write()?;
            store::set_meta(&tx, "vault_id", &vault_id)?;
            store::set_meta(&tx, "approver_public_key", &keys.approver.public_hex())?;
            store::set_meta(&tx, "created_at", &crate::time::now_utc())?;
            audit::append(
                &tx,
                "vault.init",
                None,
                None,
                &json!({
                    "vault_id": vault_id,
                    "approver_public_key": keys.approver.public_hex(),
                    "schema_version": store::LATEST_SCHEMA,
                }),
            )?;
            tx.commit().map_err(StoreError::from)?;
            paths::write_new_private(&paths.key_file(), &key_file)?;
            paths::write_new_private(&paths.id_file(), format!("{vault_id}\n").as_bytes())?;
            Ok(store)
        })();
        let store = match result {
            Ok(s) => s,
            Err(e) => {
                for f in &created {
                    let _ = std::fs::remove_file(f);
                }
                for suffix in ["-wal", "-shm"] {
                    let _ = std::fs::remove_file(
                        paths.db().with_file_name(format!("vault.db{suffix}")),
                    );
                }
                return Err(e);
            }
        };
        // A vault without a reachable keyring still works through the passphrase.
        let backend = match KeyCache::new(&vault_id)?.store(&keys.master, ttl) {
            Ok(b) => Some(b),
            Err(e) => {
                tracing::warn!("the key was not cached: {e}");
                None
            }
        };
        let mut vault = Self {
            paths,
            store,
            vault_id,
            key_source: KeySource::Passphrase,
        };
        vault.journal_unlock(backend, ttl)?;
        Ok((vault, backend))
    }

    fn read_id(paths: &VaultPaths) -> Result<String, VaultError> {
        if !paths.db().exists() {
            return Err(VaultError::NotInitialized(
                paths.dir().display().to_string(),
            ));
        }
        let id = paths.read_id()?;
        if id.is_empty() || id.chars().any(|c| !(c.is_ascii_alphanumeric() || c == '_')) {
            return Err(VaultError::BadIdFile(paths.id_file().display().to_string()));
        }
        Ok(id)
    }

    /// Opens the vault with the key from the keyring (never asks for a passphrase).
    pub fn open(paths: VaultPaths) -> Result<Self, VaultError> {
        let vault_id = Self::read_id(&paths)?;
        let (key, backend) = KeyCache::new(&vault_id)?
            .load()?
            .ok_or_else(|| VaultError::Locked(paths.dir().display().to_string()))?;
        Self::open_with(paths, vault_id, &key, KeySource::Keyring(backend))
    }

    /// Opens the vault with the passphrase (decrypts `vault.key.age`, ≈ 1-2 s of scrypt).
    pub fn open_with_passphrase(
        paths: VaultPaths,
        passphrase: &Passphrase,
    ) -> Result<(Self, KeyMaterial), VaultError> {
        let vault_id = Self::read_id(&paths)?;
        let keys = Self::unwrap(&paths, passphrase)?;
        let vault = Self::open_with(paths, vault_id, &keys.master, KeySource::Passphrase)?;
        Ok((vault, keys))
    }

    fn unwrap(paths: &VaultPaths, passphrase: &Passphrase) -> Result<KeyMaterial, VaultError> {
        let bytes = std::fs::read(paths.key_file()).map_err(|source| PathError::Read {
            path: paths.key_file(),
            source,
        })?;
        Ok(unwrap_key_file(&bytes, passphrase)?)
    }

    fn open_with(
        paths: VaultPaths,
        vault_id: String,
        key: &MasterKey,
        key_source: KeySource,
    ) -> Result<Self, VaultError> {
        let store = Store::open(&paths.db(), key)?;
        let db_id = store.meta("vault_id")?.unwrap_or_default();
        if db_id != vault_id {
            return Err(VaultError::IdMismatch {
                id_file: vault_id,
                db: db_id,
            });
        }
        Ok(Self {
            paths,
            store,
            vault_id,
            key_source,
        })
    }

    /// `vault unlock`: checks the passphrase, caches the master key, journals it.
    pub fn unlock(
        paths: VaultPaths,
        passphrase: &Passphrase,
        ttl: Duration,
    ) -> Result<(Self, Backend), VaultError> {
        let (mut vault, keys) = Self::open_with_passphrase(paths, passphrase)?;
        let backend = KeyCache::new(&vault.vault_id)?.store(&keys.master, ttl)?;
        vault.journal_unlock(Some(backend), ttl)?;
        Ok((vault, backend))
    }

    fn journal_unlock(
        &mut self,
        backend: Option<Backend>,
        ttl: Duration,
    ) -> Result<(), VaultError> {
        let body = json!({
            "keyring": backend.map(|b| b.to_string()),
            "ttl_s": matches!(backend, Some(Backend::Kernel)).then_some(ttl.as_secs()),
        });
        let tx = self.store.write()?;
        audit::append(&tx, "vault.unlock", None, None, &body)?;
        tx.commit().map_err(StoreError::from)?;
        Ok(())
    }

    /// `vault lock`: journals the lock (while the key still opens the database), then removes the
    /// key from every keyring. Returns where it was; empty if the vault was already locked.
    pub fn lock(paths: VaultPaths) -> Result<Vec<Backend>, VaultError> {
        let vault_id = Self::read_id(&paths)?;
        let cache = KeyCache::new(&vault_id)?;
        if let Ok(mut vault) = Self::open(paths) {
            let tx = vault.store.write()?;
            audit::append(&tx, "vault.lock", None, None, &json!({}))?;
            tx.commit().map_err(StoreError::from)?;
        }
        Ok(cache.remove())
    }
}
