//! A vault directory as a whole: creating it (`init`) and opening its store directly with the
//! passphrase (a person's short-lived process on a locked vault) or with a raw key (the custody
//! agent, recovery, tests). Both check that `vault.id` and the database agree.
use crate::approvals::Trust;
use crate::audit;
use crate::keys::{
    unwrap_key_file, wrap_key_file, KeyFileError, KeyMaterial, MasterKey, Passphrase,
};
use crate::paths::{self, PathError, VaultPaths};
use crate::store::{self, Store, StoreError};

/// Errors opening or changing a vault.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    #[error("no vault in {0}; run `vault init` (or point --vault-dir / VAULT_DIR at your vault)")]
    NotInitialized(String),
    #[error("{0} already holds a vault; use it, or choose another --vault-dir")]
    AlreadyInitialized(String),
    #[error("the vault in {0} is locked: no vault agent holds its key. Run `vault unlock` (it asks for your passphrase), or give the passphrase to this command (a terminal, --passphrase-stdin or VAULT_PASSPHRASE_FILE)")]
    Locked(String),
    #[error("vault.id names {id_file} but the database belongs to vault {db}; vault.id or vault.db was replaced. Restore the matching pair from a backup")]
    IdMismatch { id_file: String, db: String },
    #[error("{0} holds no vault id; restore it from a backup, or read the id with `age -d vault.key.age` and any SQLCipher tool")]
    BadIdFile(String),
    #[error(transparent)]
    KeyFile(#[from] KeyFileError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Path(#[from] PathError),
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
}

/// An open vault.
#[derive(Debug)]
pub struct Vault {
    pub paths: VaultPaths,
    pub store: Store,
    pub vault_id: String,
}

impl Vault {
    /// Creates a vault: a fresh master key and approver key, `vault.db` with the schema and its
    /// first journal row, `vault.key.age` under the passphrase, `vault.id`. Files are created
    /// with `create_new`; on failure, what this call created is removed. Returns the keys, so the
    /// caller can hand the master key to a new agent.
    pub fn init(
        paths: VaultPaths,
        passphrase: &Passphrase,
    ) -> Result<(Self, KeyMaterial), VaultError> {
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
            let body = crate::wire::journal::VaultInit {
                vault_id: vault_id.clone(),
                approver_public_key: keys.approver.public_hex(),
                schema_version: store::LATEST_SCHEMA,
            };
            audit::append(&tx, None, None, &body)?;
            tx.commit()?;
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
        Ok((
            Self {
                paths,
                store,
                vault_id,
            },
            keys,
        ))
    }

    /// The vault id of `paths`, checked for shape.
    pub fn id_of(paths: &VaultPaths) -> Result<String, VaultError> {
        Self::read_id(paths)
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

    /// Opens the vault with the passphrase (decrypts `vault.key.age`, ≈ 1-2 s of scrypt), and
    /// checks the database names the approver key the file holds.
    pub fn open_with_passphrase(
        paths: VaultPaths,
        passphrase: &Passphrase,
    ) -> Result<(Self, KeyMaterial), VaultError> {
        let keys = Self::unwrap(&paths, passphrase)?;
        let vault = Self::open_with_key(paths, &keys.master)?;
        vault.trust(&keys).check_store(vault.store.conn())?;
        Ok((vault, keys))
    }

    /// Decrypts `vault.key.age` with the passphrase.
    pub fn keys(paths: &VaultPaths, passphrase: &Passphrase) -> Result<KeyMaterial, VaultError> {
        Self::read_id(paths)?;
        Self::unwrap(paths, passphrase)
    }

    /// What a process holding `keys` trusts about this vault.
    pub fn trust(&self, keys: &KeyMaterial) -> Trust {
        Trust::new(&self.vault_id, &keys.approver)
    }

    fn unwrap(paths: &VaultPaths, passphrase: &Passphrase) -> Result<KeyMaterial, VaultError> {
        let bytes = std::fs::read(paths.key_file()).map_err(|source| PathError::Read {
            path: paths.key_file(),
            source,
        })?;
        let keys = unwrap_key_file(&bytes, passphrase)?;
        // Best effort: the master key's page is never written to swap (RLIMIT_MEMLOCK may say no).
        crate::sys::lock_in_memory(&keys.master.expose()[..]);
        Ok(keys)
    }

    /// Opens the store with a raw master key (the agent, recovery tools, tests).
    pub fn open_with_key(paths: VaultPaths, key: &MasterKey) -> Result<Self, VaultError> {
        let vault_id = Self::read_id(&paths)?;
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
        })
    }
}
