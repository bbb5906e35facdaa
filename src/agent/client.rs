//! The blocking client the CLI and `vault approve` use: find the vault's agent, say hello (in
//! plain text, or over the encrypted channel that only the real agent can complete when the
//! command holds the vault's key), send typed requests and read their replies and events. `vault
//! mcp` has its own async client (`mcp::link`). Nothing here waits for ever: the connect, the
//! channel's handshake, each write and each call have a deadline (`[agent] answer_seconds`,
//! longer for the requests that legitimately take longer), past which the command is told what to
//! check (`ClientError::Silent`); a command that waits on events for long (`vault approve`) pings
//! the agent when it has been quiet (`keep_alive`). When the agent says it stops, the error says
//! why.
mod calls;
mod decide;

pub use decide::{Decided, Proof, Toucher};

use super::channel::{Initiator, Opener, Sealer};
use super::holder::{Holder, Stopped};
use super::protocol::{self, ErrorCode, Event, Reply, Request, Role, Splitter};
use crate::paths::VaultPaths;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use zeroize::Zeroizing;

/// How long a command waits for the agent when `config.toml` does not say (`[agent]
/// answer_seconds`).
const DEFAULT_ANSWER: Duration = Duration::from_secs(30);

/// Errors talking to the agent.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("the vault agent went away mid-request; run `vault unlock` and try again")]
    Gone,
    #[error("the connection was cut mid-request by the process on {socket} (pid {listener}), which stands between this command and the vault agent; it could read and change nothing on the encrypted channel. `vault lock`, then `vault unlock`, takes the path back; then run the command again")]
    CutByRelay { socket: PathBuf, listener: u32 },
    #[error("the process on {0} is not this vault's agent (it could not prove it holds the key); `vault unlock` replaces it")]
    Impostor(PathBuf),
    #[error("the process listening on the socket {socket} (pid {listener}) is not the vault agent (pid {agent}, which holds agent.lock): something moved the socket and stands in between, and could read or change what this command sends in plain text, so nothing was sent. `vault lock`, then `vault unlock`, takes the path back")]
    NotTheAgent {
        socket: PathBuf,
        listener: u32,
        agent: u32,
    },
    #[error("the vault agent refused: {message}")]
    Refused { code: ErrorCode, message: String },
    #[error("the vault agent did not answer within {secs} s{relay}; check `vault doctor`, or restart it with `vault unlock --restart`")]
    Silent { secs: u64, relay: String },
    #[error("the vault agent stopped: {reason}; run `vault unlock`, then try again")]
    Stopped { reason: String },
    #[error("talking to the vault agent failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the vault agent answered something unreadable: {0}")]
    Protocol(String),
    #[error("{0}")]
    Touch(String),
}

/// A connection to a running agent.
pub struct Client {
    stream: UnixStream,
    splitter: Splitter,
    /// What each read lands in before the splitter takes it (wiped on drop).
    read_buf: Zeroizing<Box<[u8]>>,
    /// The encrypted channel, once opened (`connect_secure`).
    sealer: Option<Sealer>,
    opener: Option<Opener>,
    next_id: u64,
    pending_events: Vec<(u64, Event)>,
    /// How long a call waits for its answer (`[agent] answer_seconds`).
    deadline: Duration,
    /// When the agent last sent anything, and when an unanswered `ping` went out.
    last_heard: Instant,
    ping_sent: Option<Instant>,
    /// Why the agent said it stops, if it did.
    stopping: Option<String>,
    pub vault_id: String,
    pub pid: u32,
    pub socket: PathBuf,
    /// What the agent said the person should hear (its socket path moved, …).
    pub warnings: Vec<String>,
    /// The pid of the process on the socket path when it is not the agent (the channel's
    /// connections are relayed, and said to be).
    relay: Option<u32>,
}

/// The socket of the vault in `paths`, if the vault exists.
pub fn socket_of(paths: &VaultPaths) -> Option<PathBuf> {
    let id = paths.read_id().ok().filter(|i| !i.is_empty())?;
    Some(super::socket::socket_path(&id))
}

impl Client {
    /// Connects to the vault's agent in plain text; `Ok(None)` when none listens. Requests that
    /// carry a secret, a signature or a card's content need `connect_secure`.
    pub fn connect(paths: &VaultPaths, role: Role) -> Result<Option<Self>, ClientError> {
        Self::connect_as(paths, role, None)
    }

    /// Connects with a client label (an MCP-like session), in plain text.
    pub fn connect_as(
        paths: &VaultPaths,
        role: Role,
        client: Option<crate::wire::ClientInfo>,
    ) -> Result<Option<Self>, ClientError> {
        let Some(socket) = socket_of(paths) else {
            return Ok(None);
        };
        let Some(mut c) = Self::open_stream(paths, &socket, false)? else {
            return Ok(None);
        };
        c.hello(role, client)?;
        Ok(Some(c))
    }

    /// Connects over the encrypted channel keyed from the master key (`channel::channel_key`):
    /// only the real agent can complete the handshake, and a process that relays the socket sees
    /// ciphertext only. `Ok(None)` when none listens; `Impostor` when what listens is not this
    /// vault's agent.
    pub fn connect_secure(
        paths: &VaultPaths,
        psk: &[u8; 32],
        role: Role,
    ) -> Result<Option<Self>, ClientError> {
        let Some(socket) = socket_of(paths) else {
            return Ok(None);
        };
        let vault_id = paths
            .read_id()
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        let Some(mut c) = Self::open_stream(paths, &socket, true)? else {
            return Ok(None);
        };
        let (init, open) =
            Initiator::start(psk, &vault_id).map_err(|e| ClientError::Protocol(e.to_string()))?;
        let impostor = || ClientError::Impostor(socket.clone());
        c.stream.write_all(&open).map_err(|_| impostor())?;
        let accept = match c.read_unit(Instant::now() + c.deadline) {
            Ok(Some(accept)) => accept,
            Ok(None) => return Err(c.silent(c.deadline)),
            Err(_) => return Err(impostor()),
        };
        let (sealer, opener) = init.finish(&accept).map_err(|_| impostor())?;
        c.sealer = Some(sealer);
        c.opener = Some(opener);
        c.hello(role, None)?;
        if c.vault_id != vault_id {
            return Err(impostor());
        }
        Ok(Some(c))
    }

    /// A stream to `socket`, if its directory is sound and the vault's agent listens there.
    /// The listener's pid (`SO_PEERCRED`) must be the agent's, the holder of `agent.lock`:
    /// with nobody holding the lock no agent runs (`None`: the vault is locked); another process
    /// on the path stands between this command and the agent. Over the encrypted channel
    /// (`secure`) that is only said (it can read and change nothing); in plain text it is refused.
    fn open_stream(
        paths: &VaultPaths,
        socket: &Path,
        secure: bool,
    ) -> Result<Option<Self>, ClientError> {
        if let Some(dir) = socket.parent() {
            if super::socket::check_dir(dir).is_err() {
                return Ok(None);
            }
        }
        let deadline = crate::config::Config::load(paths)
            .map(|c| c.agent_answer())
            .unwrap_or(DEFAULT_ANSWER);
        let stream = match super::socket::connect_within(socket, deadline) {
            Ok(s) => s,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) =>
            {
                return Ok(None)
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                return Err(ClientError::Silent {
                    secs: deadline.as_secs(),
                    relay: String::new(),
                })
            }
            Err(e) => return Err(e.into()),
        };
        stream.set_write_timeout(Some(deadline))?;
        let (mut warnings, mut relay) = (Vec::new(), None);
        let listener = super::holder::peer_pid(&stream);
        match (super::holder::holder(paths), listener) {
            (Holder::Nobody, _) => {
                tracing::warn!(
                    "a process (pid {}) listens on {} but no vault agent runs; ignoring it",
                    listener.map_or("?".into(), |p| p.to_string()),
                    socket.display()
                );
                return Ok(None);
            }
            (Holder::Pid(agent), Some(listener)) if agent != listener => {
                if !secure {
                    return Err(ClientError::NotTheAgent {
                        socket: socket.to_owned(),
                        listener,
                        agent,
                    });
                }
                relay = Some(listener);
                warnings.push(format!(
                    "the process listening on the socket {} (pid {listener}) is not the vault agent (pid {agent}): something moved the socket and relays this connection. It sees only the encrypted channel; `vault lock`, then `vault unlock`, takes the path back",
                    socket.display()
                ));
            }
            _ => {}
        }
        for w in &warnings {
            tracing::warn!("{w}");
        }
        Ok(Some(Self {
            stream,
            splitter: Splitter::default(),
            read_buf: Zeroizing::new(vec![0u8; 64 * 1024].into_boxed_slice()),
            sealer: None,
            opener: None,
            next_id: 1,
            pending_events: Vec::new(),
            deadline,
            last_heard: Instant::now(),
            ping_sent: None,
            stopping: None,
            vault_id: String::new(),
            pid: 0,
            socket: socket.to_owned(),
            warnings,
            relay,
        }))
    }

    /// For `vault run`'s relay: a plain-text connection to the vault's agent (its listener
    /// checked as for any plain command) that has told the agent it carries the contained
    /// process `pid` (`Request::Contained`, answered before anything else; with `None`, a
    /// weaker sandbox's, nothing is said). The stream is then handed to the relay, which passes
    /// the contained `vault mcp`'s bytes through as they are.
    pub fn contained_stream(
        paths: &VaultPaths,
        pid: Option<u32>,
    ) -> Result<Option<UnixStream>, ClientError> {
        let Some(socket) = socket_of(paths) else {
            return Ok(None);
        };
        let Some(mut c) = Self::open_stream(paths, &socket, false)? else {
            return Ok(None);
        };
        if let Some(pid) = pid {
            match c.call(Request::Contained { pid })? {
                Reply::Ok => {}
                other => return Err(ClientError::Protocol(format!("{other:?}"))),
            }
        }
        // The relay waits on it for as long as the session lasts: no deadline of a call's.
        c.stream.set_read_timeout(None)?;
        c.stream.set_write_timeout(None)?;
        Ok(Some(c.stream))
    }

    fn hello(
        &mut self,
        role: Role,
        client: Option<crate::wire::ClientInfo>,
    ) -> Result<(), ClientError> {
        let hello = Request::Hello {
            v: protocol::VERSION,
            role,
            client,
            profile: None,
        };
        match self.call(hello)? {
            Reply::Welcome {
                vault_id,
                pid,
                warnings,
                ..
            } => {
                self.vault_id = vault_id;
                self.pid = pid;
                for w in &warnings {
                    tracing::warn!("the vault agent says: {w}");
                }
                self.warnings.extend(warnings);
                Ok(())
            }
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// The connection ended mid-request: the agent stopped (and said why), went away, or the
    /// process found standing on the socket path (and named when connecting) cut it.
    fn gone(&self) -> ClientError {
        match (&self.stopping, self.relay) {
            (Some(reason), _) => ClientError::Stopped {
                reason: reason.clone(),
            },
            (None, Some(listener)) => ClientError::CutByRelay {
                socket: self.socket.clone(),
                listener,
            },
            (None, None) => ClientError::Gone,
        }
    }

    /// No answer within `waited`; names the process on the socket path when it is not the agent.
    fn silent(&self, waited: Duration) -> ClientError {
        ClientError::Silent {
            secs: waited.as_secs(),
            relay: self.relay.map_or(String::new(), |pid| {
                format!(
                    " (the process on its socket {}, pid {pid}, is not the agent and stands in between: `vault lock`, then `vault unlock`, takes the path back)",
                    self.socket.display()
                )
            }),
        }
    }

    /// The pid of the process on the socket path when it is not the agent (it relays this
    /// connection, which it can neither read nor change over the encrypted channel).
    pub fn relayed(&self) -> Option<u32> {
        self.relay
    }

    /// How long a call waits for the agent's answer.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }
}

/// `vault lock`: stops the vault's running agent (`stop_running_for` with `Order::Lock`).
pub fn stop_running(paths: &VaultPaths) -> Stopped {
    stop_running_for(paths, super::holder::Order::Lock)
}

/// Stops the vault's running agent by signal to the holder of its lock (never through the
/// socket, which may not be its own), with `order` (`Lock`, or `Restart` when a new agent
/// follows). Where the kernel's list of locks cannot be read (not Linux), it falls back to asking
/// whatever listens on the socket to lock, and says so.
pub fn stop_running_for(paths: &VaultPaths, order: super::holder::Order) -> Stopped {
    match super::holder::stop_for(paths, Duration::from_secs(15), order) {
        Stopped::Unreachable => {
            tracing::warn!("the vault agent's pid cannot be known on this system; asking it to lock through its socket");
            let asked = socket_of(paths)
                .and_then(|s| Client::open_stream(paths, &s, false).ok().flatten())
                .is_some_and(|mut c| {
                    c.hello(Role::Cli, None).is_ok() && c.call(Request::Lock).is_ok()
                });
            match super::take_lock(paths, Duration::from_secs(15)) {
                Ok(_) if asked => Stopped::Locked(0),
                Ok(_) => Stopped::NotRunning,
                Err(_) => Stopped::Unreachable,
            }
        }
        other => other,
    }
}
