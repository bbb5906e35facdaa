//! How a person's command reaches the vault: through the running custody agent, or (locked, with
//! the passphrase from a terminal, `--passphrase-stdin` or `VAULT_PASSPHRASE_FILE`) by opening
//! the store in this short-lived process. Either way the same request goes through the same
//! service (`services::ops::handle`).
use crate::agent::client::{Client, ClientError};
use crate::agent::protocol::{ErrorCode, Reply, Request, Role};
use crate::approvals::Trust;
use crate::keys::{KeyMaterial, PassphraseSource};
use crate::paths::VaultPaths;
use crate::vault::{Vault, VaultError};

/// A refusal by the vault, with its category (for the exit code).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Refused {
    pub code: ErrorCode,
    pub message: String,
}

pub enum Backend {
    Agent(Client),
    Direct {
        vault: Box<Vault>,
        trust: Trust,
        keys: Box<KeyMaterial>,
    },
}

impl Backend {
    /// The agent if one runs, else the store opened with the passphrase from `source` (a
    /// terminal only if there is one), else `Locked`.
    pub fn open(paths: &VaultPaths, source: PassphraseSource) -> anyhow::Result<Self> {
        Vault::id_of(paths)?;
        if let Some(c) = Client::connect(paths, Role::Cli)? {
            return Ok(Backend::Agent(c));
        }
        if source == PassphraseSource::Terminal && !has_terminal() {
            return Err(VaultError::Locked(paths.dir().display().to_string()).into());
        }
        let passphrase = source.read("The vault is locked. Vault passphrase: ")?;
        Self::direct(paths, &passphrase)
    }

    /// The store opened with the passphrase, in this process.
    pub fn direct(
        paths: &VaultPaths,
        passphrase: &crate::keys::Passphrase,
    ) -> anyhow::Result<Self> {
        Self::with_keys(paths, Vault::keys(paths, passphrase)?)
    }

    /// The store opened with keys already decrypted from `vault.key.age`.
    pub fn with_keys(paths: &VaultPaths, keys: KeyMaterial) -> anyhow::Result<Self> {
        let mut vault = Vault::open_with_key(paths.clone(), &keys.master)?;
        vault.trust(&keys).check_store(vault.store.conn())?;
        // No agent holds the vault: nothing it started can still be running.
        if !crate::agent::is_running(paths) {
            let _ = crate::approvals::reap_orphans(&mut vault.store);
        }
        let trust = vault.trust(&keys);
        Ok(Backend::Direct {
            vault: Box::new(vault),
            trust,
            keys: Box::new(keys),
        })
    }

    /// Runs one request; a refusal becomes an error.
    pub fn call(&mut self, req: Request) -> anyhow::Result<Reply> {
        let reply = match self {
            Backend::Agent(c) => match c.call(req) {
                Ok(r) => r,
                Err(ClientError::Refused { code, message }) => Reply::Error { code, message },
                Err(e) => return Err(e.into()),
            },
            Backend::Direct { vault, trust, .. } => {
                let paths = vault.paths.clone();
                crate::services::ops::handle(&mut vault.store, trust, &paths, req)
            }
        };
        match reply {
            Reply::Error { code, message } => Err(Refused { code, message }.into()),
            r => Ok(r),
        }
    }

    /// The vault id.
    pub fn vault_id(&self) -> &str {
        match self {
            Backend::Agent(c) => &c.vault_id,
            Backend::Direct { vault, .. } => &vault.vault_id,
        }
    }
}

/// Whether this process has a controlling terminal to ask on.
pub fn has_terminal() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .is_ok()
}

/// Reports an unexpected reply kind.
pub fn unexpected(reply: Reply) -> anyhow::Error {
    anyhow::anyhow!("the vault answered something unexpected: {reply:?}")
}
