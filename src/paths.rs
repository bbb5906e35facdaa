//! Where a vault lives on disk, and the only ways this crate creates files there (0700 / 0600).
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Errors about the vault directory and its files.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("cannot find a home for the vault: set VAULT_DIR or pass --vault-dir DIR")]
    NoDataDir,
    #[error("cannot create the vault directory {path}: {source}; check the parent's permissions or choose another --vault-dir")]
    CreateDir { path: PathBuf, source: io::Error },
    #[error("{path} already exists; refusing to overwrite it (move it away first if you really mean to replace it)")]
    Exists { path: PathBuf },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
}

/// The files of one vault directory.
#[derive(Debug, Clone)]
pub struct VaultPaths {
    dir: PathBuf,
}

impl VaultPaths {
    /// `--vault-dir`, else `$VAULT_DIR`, else the platform data dir (`~/.local/share/agent-vault`).
    pub fn resolve(explicit: Option<PathBuf>) -> Result<Self, PathError> {
        let dir = match explicit {
            Some(d) => d,
            None => match std::env::var_os("VAULT_DIR").filter(|v| !v.is_empty()) {
                Some(d) => PathBuf::from(d),
                None => Self::default_dir().ok_or(PathError::NoDataDir)?,
            },
        };
        Ok(Self { dir })
    }

    /// Where the vault is when nothing says otherwise: `agent-vault` in the platform data dir.
    pub fn default_dir() -> Option<PathBuf> {
        Some(dirs::data_dir()?.join("agent-vault"))
    }

    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// The SQLCipher database.
    pub fn db(&self) -> PathBuf {
        self.dir.join("vault.db")
    }
    /// The age file holding the master key and the approver seed (docs/design.md §3).
    pub fn key_file(&self) -> PathBuf {
        self.dir.join("vault.key.age")
    }
    /// The public vault id, readable without any key (it names the keyring entry).
    pub fn id_file(&self) -> PathBuf {
        self.dir.join("vault.id")
    }
    /// Optional limits and timings (docs/design.md §6).
    pub fn config(&self) -> PathBuf {
        self.dir.join("config.toml")
    }
    /// Heads of the audit chain kept outside the database.
    pub fn anchors(&self) -> PathBuf {
        self.dir.join("anchors.jsonl")
    }
    /// Responses for `vault run`'s proxy too large for the agent's reply, one file per action
    /// (`<action id>.body`), removed by the proxy once read and by the agent when it starts.
    pub fn relayed(&self) -> PathBuf {
        self.dir.join("relayed")
    }

    /// Whether this directory already holds a vault (any of its defining files).
    pub fn is_initialized(&self) -> bool {
        self.db().exists() || self.key_file().exists() || self.id_file().exists()
    }

    /// Creates the directory (and parents) with mode 0700; tightens an existing one we own.
    pub fn create_dir(&self) -> Result<(), PathError> {
        let err = |source| PathError::CreateDir {
            path: self.dir.clone(),
            source,
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(err)?;
        fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o700)).map_err(err)
    }

    /// Reads the vault id file.
    pub fn read_id(&self) -> Result<String, PathError> {
        let path = self.id_file();
        let text = fs::read_to_string(&path).map_err(|source| PathError::Read {
            path: path.clone(),
            source,
        })?;
        Ok(text.trim().to_owned())
    }
}

/// Sets the process umask to 077 so nothing we (or SQLite) create is readable by others.
pub fn restrict_umask() {
    crate::sys::restrict_umask();
}

/// Creates `path` with mode 0600, failing if it exists (`create_new`), and writes `bytes`.
pub fn write_new_private(path: &Path, bytes: &[u8]) -> Result<(), PathError> {
    let mut file = create_new_private(path)?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|source| PathError::Write {
            path: path.to_owned(),
            source,
        })
}

/// Opens a new, empty 0600 file; an existing file is an error, never truncated.
pub fn create_new_private(path: &Path) -> Result<File, PathError> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| {
            if source.kind() == io::ErrorKind::AlreadyExists {
                PathError::Exists {
                    path: path.to_owned(),
                }
            } else {
                PathError::Write {
                    path: path.to_owned(),
                    source,
                }
            }
        })
}

/// Mode bits of a path, for `vault doctor`.
pub fn mode_of(path: &Path) -> Option<u32> {
    fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_private_files_are_0600_and_never_overwritten() {
        let dir = std::env::temp_dir().join(format!("av-paths-{}", std::process::id()));
        let paths = VaultPaths::new(&dir);
        paths.create_dir().unwrap();
        assert_eq!(mode_of(&dir), Some(0o700));
        let f = dir.join("x");
        write_new_private(&f, b"one").unwrap();
        assert_eq!(mode_of(&f), Some(0o600));
        assert!(matches!(
            write_new_private(&f, b"two"),
            Err(PathError::Exists { .. })
        ));
        assert_eq!(fs::read(&f).unwrap(), b"one");
        fs::remove_dir_all(&dir).unwrap();
    }
}
