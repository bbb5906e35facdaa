//! How a person's command reaches the vault: through the running custody agent, or (locked, with
//! the passphrase from a terminal, `--passphrase-stdin` or `VAULT_PASSPHRASE_FILE`) by opening
//! the store in this short-lived process. Either way the same request goes through the same
//! service (`services::ops::handle`). A command that hands the vault a secret first makes the
//! agent prove it holds the vault's key (`verified`): an impostor on the socket path gets nothing.
use crate::agent::client::{Client, ClientError};
use crate::agent::protocol::{ErrorCode, Reply, Request, Role};
use crate::approvals::Trust;
use crate::keys::{KeyMaterial, PassphraseSource};
use crate::paths::VaultPaths;
use crate::vault::{Vault, VaultError};

/// `--passphrase-stdin`, for every command that may need the passphrase (a change to sign, or a
/// locked vault to open here).
#[derive(Debug, Clone, Copy, clap::Args)]
pub(super) struct PassphraseArg {
    /// Read the passphrase from the first line of stdin (else VAULT_PASSPHRASE_FILE, else the
    /// terminal).
    #[arg(long)]
    passphrase_stdin: bool,
}

impl PassphraseArg {
    pub(super) fn source(self) -> PassphraseSource {
        PassphraseSource::choose(self.passphrase_stdin)
    }

    pub(super) fn is_stdin(self) -> bool {
        self.passphrase_stdin
    }
}

/// The vault's keys from a passphrase read from `source`; a wrong one says where it came from.
pub(super) fn keys_from(
    paths: &VaultPaths,
    source: &PassphraseSource,
    passphrase: &crate::keys::Passphrase,
) -> anyhow::Result<KeyMaterial> {
    Vault::keys(paths, passphrase).map_err(|e| {
        let wrong = matches!(
            e,
            VaultError::KeyFile(crate::keys::KeyFileError::WrongPassphrase)
        );
        match source.wrong_hint() {
            Some(hint) if wrong => anyhow::Error::new(e).context(hint),
            _ => e.into(),
        }
    })
}

/// How many times a terminal is asked for the passphrase before a wrong one is the answer.
const PASSPHRASE_TRIES: u32 = 3;

/// The passphrase from `source` (asked with `prompt`) and the keys it opens. At a terminal a
/// wrong passphrase is asked for again, up to three times in all: a typo is not a disaster.
/// From stdin or a file, a wrong one is the answer at once.
pub(super) fn read_keys(
    paths: &VaultPaths,
    source: &PassphraseSource,
    prompt: &str,
) -> anyhow::Result<KeyMaterial> {
    let mut asked = prompt.to_owned();
    for tried in 1..=PASSPHRASE_TRIES {
        let passphrase = source.read(&asked)?;
        match Vault::keys(paths, &passphrase) {
            Err(VaultError::KeyFile(crate::keys::KeyFileError::WrongPassphrase))
                if *source == PassphraseSource::Terminal && tried < PASSPHRASE_TRIES =>
            {
                asked = format!(
                    "Wrong passphrase (nothing was changed; {} more tries). {prompt}",
                    PASSPHRASE_TRIES - tried
                );
            }
            _ => return keys_from(paths, source, &passphrase),
        }
    }
    unreachable!("the last try returns")
}

/// A refusal by the vault, with its category (for the exit code).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(super) struct Refused {
    pub code: ErrorCode,
    pub message: String,
}

enum Conn {
    Agent(Client),
    Direct { vault: Box<Vault>, trust: Trust },
}

pub(super) struct Backend {
    conn: Conn,
    /// The keys, when this command was given the passphrase.
    keys: Option<Box<KeyMaterial>>,
}

impl Backend {
    /// The agent if one runs, else the store opened with the passphrase from `source` (a
    /// terminal only if there is one), else `Locked`.
    pub(super) fn open(paths: &VaultPaths, source: PassphraseSource) -> anyhow::Result<Self> {
        Vault::id_of(paths)?;
        if let Some(c) = Client::connect(paths, Role::Cli)? {
            return Ok(Self::agent(c));
        }
        if source == PassphraseSource::Terminal && !has_terminal() {
            return Err(VaultError::Locked(paths.dir().display().to_string()).into());
        }
        let keys = read_keys(paths, &source, "The vault is locked. Vault passphrase: ")?;
        Self::with_keys(paths, keys)
    }

    /// For a command that hands the vault a secret: with the passphrase, the agent must prove it
    /// holds the key before anything is sent (else this is an impostor, refused); with no agent,
    /// the store is opened here.
    pub(super) fn verified(paths: &VaultPaths, source: PassphraseSource) -> anyhow::Result<Self> {
        Vault::id_of(paths)?;
        if source == PassphraseSource::Terminal && !has_terminal() {
            if Client::connect(paths, Role::Cli)?.is_none() {
                return Err(VaultError::Locked(paths.dir().display().to_string()).into());
            }
            return Err(anyhow::Error::new(crate::keys::PassphraseError::NoTerminal {
                what: "passphrase",
                instead: crate::keys::PASSPHRASE_INSTEAD,
            })
            .context("a change goes only to a vault agent that proves it holds the vault's key, and is signed with your approver key: both take your passphrase"));
        }
        let keys = read_keys(
            paths,
            &source,
            "Vault passphrase (to check the vault agent): ",
        )?;
        Self::secure(paths, keys)
    }

    /// With the keys at hand: the agent over the encrypted channel (a process on the socket path
    /// that is not the agent can neither complete it nor read what crosses it), else the store
    /// opened here.
    pub(super) fn secure(paths: &VaultPaths, keys: KeyMaterial) -> anyhow::Result<Self> {
        let psk = crate::agent::channel::channel_key(&keys.master);
        match Client::connect_secure(paths, &psk, Role::Cli) {
            Ok(Some(c)) => Ok(Self {
                conn: Conn::Agent(c),
                keys: Some(Box::new(keys)),
            }),
            Ok(None) => Self::with_keys(paths, keys),
            Err(ClientError::Impostor(socket)) => anyhow::bail!(
                "the process listening on {} is not this vault's agent (it cannot open the encrypted channel, which takes the vault's key); nothing was sent. `vault lock`, then `vault unlock`, replaces it",
                socket.display()
            ),
            Err(e) => Err(e.into()),
        }
    }

    fn agent(c: Client) -> Self {
        Self {
            conn: Conn::Agent(c),
            keys: None,
        }
    }

    /// The store opened with keys already decrypted from `vault.key.age`.
    pub(super) fn with_keys(paths: &VaultPaths, keys: KeyMaterial) -> anyhow::Result<Self> {
        let mut vault = Vault::open_with_key(paths.clone(), &keys.master)?;
        vault.trust(&keys).check_store(vault.store.conn())?;
        // No agent holds the vault: nothing it started can still be running.
        if !crate::agent::is_running(paths) {
            let _ = crate::approvals::reap_orphans(&mut vault.store);
        }
        let trust = vault.trust(&keys);
        Ok(Self {
            conn: Conn::Direct {
                vault: Box::new(vault),
                trust,
            },
            keys: Some(Box::new(keys)),
        })
    }

    /// Runs one request; a refusal becomes an error.
    pub(super) fn call(&mut self, req: Request) -> anyhow::Result<Reply> {
        let reply = match &mut self.conn {
            Conn::Agent(c) => match c.call(req) {
                Ok(r) => r,
                Err(ClientError::Refused { code, message }) => Reply::Error { code, message },
                Err(e) => return Err(e.into()),
            },
            Conn::Direct { vault, trust } => {
                let paths = vault.paths.clone();
                crate::services::ops::handle(&mut vault.store, trust, &paths, req)
            }
        };
        match reply {
            Reply::Error { code, message } => Err(Refused { code, message }.into()),
            r => Ok(r),
        }
    }

    /// The store's versions, journal, pause switch and queue (`vault doctor`).
    pub(super) fn store_status(&mut self) -> anyhow::Result<crate::agent::protocol::StoreStatus> {
        match &mut self.conn {
            Conn::Agent(c) => match c.call(Request::Status)? {
                Reply::Status(s) => s
                    .store
                    .ok_or_else(|| anyhow::anyhow!("the vault agent did not report its store")),
                other => Err(unexpected(other)),
            },
            Conn::Direct { vault, .. } => Ok(crate::services::ops::store_status(&vault.store)?),
        }
    }

    /// The vault id.
    pub(super) fn vault_id(&self) -> &str {
        match &self.conn {
            Conn::Agent(c) => &c.vault_id,
            Conn::Direct { vault, .. } => &vault.vault_id,
        }
    }

    /// The keys, if this command was given the passphrase.
    pub(super) fn keys(&self) -> Option<&KeyMaterial> {
        self.keys.as_deref()
    }

    /// Whether the requests go to a live agent (which can wait for new journal rows).
    pub(super) fn is_agent(&self) -> bool {
        matches!(self.conn, Conn::Agent(_))
    }
}

/// Whether this process has a controlling terminal to ask on.
pub(super) fn has_terminal() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .is_ok()
}

/// Reports an unexpected reply kind.
pub(super) fn unexpected(reply: Reply) -> anyhow::Error {
    anyhow::anyhow!("the vault answered something unexpected: {reply:?}")
}
