//! The blocking client the CLI and `vault approve` use: find the vault's agent, say hello (the
//! approver with a challenge only the real agent can answer), send typed requests and read their
//! replies and events. `vault mcp` has its own async client (`mcp::link`).
use super::protocol::{
    self, AgentFrame, ApprovalView, ClientFrame, ErrorCode, Event, Reply, Request, Role, Splitter,
};
use crate::approvals::{Action, Verdict};
use crate::keys::KeyMaterial;
use crate::paths::VaultPaths;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Errors talking to the agent.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("the vault agent went away mid-request; run `vault unlock` and try again")]
    Gone,
    #[error("the process on {0} is not this vault's agent (it could not prove it holds the key); `vault unlock` replaces it")]
    Impostor(PathBuf),
    #[error("the vault agent refused: {message}")]
    Refused { code: ErrorCode, message: String },
    #[error("talking to the vault agent failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the vault agent answered something unreadable: {0}")]
    Protocol(String),
}

/// A connection to a running agent.
pub struct Client {
    stream: UnixStream,
    splitter: Splitter,
    next_id: u64,
    pending_events: Vec<(u64, Event)>,
    pub vault_id: String,
    pub pid: u32,
    pub socket: PathBuf,
}

/// The socket of the vault in `paths`, if the vault exists.
pub fn socket_of(paths: &VaultPaths) -> Option<PathBuf> {
    let id = paths.read_id().ok().filter(|i| !i.is_empty())?;
    Some(super::socket::socket_path(&id))
}

impl Client {
    /// Connects to the vault's agent; `Ok(None)` when none listens.
    pub fn connect(paths: &VaultPaths, role: Role) -> Result<Option<Self>, ClientError> {
        Self::connect_as(paths, role, None)
    }

    /// Connects with a profile and client label (an MCP-like session).
    pub fn connect_as(
        paths: &VaultPaths,
        role: Role,
        client: Option<crate::mcp::protocol::ClientInfo>,
    ) -> Result<Option<Self>, ClientError> {
        let Some(socket) = socket_of(paths) else {
            return Ok(None);
        };
        Ok(Self::connect_hello(&socket, role, None, client)?.map(|(c, _)| c))
    }

    /// Connects as the approver: the agent must prove it holds `proof_key` (derived from the
    /// master key the approver just decrypted), or this is an impostor.
    pub fn connect_verified(
        paths: &VaultPaths,
        proof_key: &[u8; 32],
    ) -> Result<Option<Self>, ClientError> {
        let Some(socket) = socket_of(paths) else {
            return Ok(None);
        };
        let mut nonce = [0u8; 32];
        getrandom::fill(&mut nonce).expect("the OS random number generator failed");
        let challenge = hex::encode(nonce);
        let expected = super::proof(proof_key, &challenge);
        match Self::connect_to(&socket, Role::Approver, Some(&challenge))? {
            None => Ok(None),
            Some((c, proof)) if proof.as_deref() == Some(expected.as_str()) => Ok(Some(c)),
            Some(_) => Err(ClientError::Impostor(socket)),
        }
    }

    fn connect_to(
        socket: &Path,
        role: Role,
        challenge: Option<&str>,
    ) -> Result<Option<(Self, Option<String>)>, ClientError> {
        Self::connect_hello(socket, role, challenge, None)
    }

    fn connect_hello(
        socket: &Path,
        role: Role,
        challenge: Option<&str>,
        client: Option<crate::mcp::protocol::ClientInfo>,
    ) -> Result<Option<(Self, Option<String>)>, ClientError> {
        if let Some(dir) = socket.parent() {
            if super::socket::check_dir(dir).is_err() {
                return Ok(None);
            }
        }
        let stream = match UnixStream::connect(socket) {
            Ok(s) => s,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e.into()),
        };
        let mut c = Self {
            stream,
            splitter: Splitter::default(),
            next_id: 1,
            pending_events: Vec::new(),
            vault_id: String::new(),
            pid: 0,
            socket: socket.to_owned(),
        };
        let hello = Request::Hello {
            v: protocol::VERSION,
            role,
            client,
            profile: None,
            challenge: challenge.map(str::to_owned),
        };
        match c.call(hello)? {
            Reply::Welcome {
                vault_id,
                pid,
                proof,
                ..
            } => {
                c.vault_id = vault_id;
                c.pid = pid;
                Ok(Some((c, proof)))
            }
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// Sends a request; returns its id.
    pub fn send(&mut self, req: Request) -> Result<u64, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let line = protocol::encode(&ClientFrame { id, req });
        self.stream.write_all(&line)?;
        Ok(id)
    }

    /// Sends a request and waits for its reply (events that arrive meanwhile are kept).
    pub fn call(&mut self, req: Request) -> Result<Reply, ClientError> {
        let id = self.send(req)?;
        loop {
            match self.read_frame(None)? {
                Some(AgentFrame::Reply { id: rid, reply }) if rid == id || rid == 0 => {
                    return match *reply {
                        Reply::Error { code, message } => {
                            Err(ClientError::Refused { code, message })
                        }
                        r => Ok(r),
                    }
                }
                Some(AgentFrame::Reply { .. }) => {}
                Some(AgentFrame::Event { id, event }) => self.pending_events.push((id, event)),
                None => return Err(ClientError::Gone),
            }
        }
    }

    /// The next reply to any request sent with `send` (events that arrive meanwhile are kept).
    pub fn next_reply(&mut self) -> Result<(u64, Reply), ClientError> {
        loop {
            match self.read_frame(None)? {
                Some(AgentFrame::Reply { id, reply }) => return Ok((id, *reply)),
                Some(AgentFrame::Event { id, event }) => self.pending_events.push((id, event)),
                None => return Err(ClientError::Gone),
            }
        }
    }

    /// The next event, waiting at most `timeout` (`Ok(None)` when none came).
    pub fn next_event(&mut self, timeout: Duration) -> Result<Option<(u64, Event)>, ClientError> {
        if !self.pending_events.is_empty() {
            return Ok(Some(self.pending_events.remove(0)));
        }
        match self.read_frame(Some(timeout))? {
            Some(AgentFrame::Event { id, event }) => Ok(Some((id, event))),
            Some(AgentFrame::Reply { .. }) => Ok(None),
            None if timeout.is_zero() => Ok(None),
            None => Ok(None),
        }
    }

    /// The descriptor to wait on (with the terminal) in `vault approve`.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.stream.as_fd()
    }

    /// One frame; `None` at end of stream, or when `timeout` passed first.
    fn read_frame(&mut self, timeout: Option<Duration>) -> Result<Option<AgentFrame>, ClientError> {
        self.stream
            .set_read_timeout(timeout.map(|t| t.max(Duration::from_millis(1))))?;
        let mut buf = [0u8; 64 * 1024];
        loop {
            if let Some(line) = self
                .splitter
                .next_line()
                .map_err(|e| ClientError::Protocol(e.to_string()))?
            {
                return protocol::decode(&line)
                    .map(Some)
                    .map_err(|e| ClientError::Protocol(e.to_string()));
            }
            match self.stream.read(&mut buf) {
                Ok(0) => {
                    return if timeout.is_some() {
                        Err(ClientError::Gone)
                    } else {
                        Ok(None)
                    }
                }
                Ok(n) => self.splitter.push(&buf[..n]),
                Err(e)
                    if timeout.is_some()
                        && matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                {
                    return Ok(None)
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Waits until the agent closes the connection (after `Lock`), at most `timeout`.
    fn wait_closed(&mut self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let mut buf = [0u8; 4096];
        while std::time::Instant::now() < deadline {
            let _ = self
                .stream
                .set_read_timeout(Some(deadline - std::time::Instant::now()));
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        false
    }
}

/// A connection to the vault's real agent: one that proves it holds the master key in `keys`.
/// If none runs (or an impostor holds the socket path), a new agent is started with the key.
pub fn approver_client(paths: &VaultPaths, keys: &KeyMaterial) -> Result<Client, ClientError> {
    let proof_key = super::proof_key(&keys.master);
    match Client::connect_verified(paths, &proof_key) {
        Ok(Some(c)) => return Ok(c),
        Ok(None) => {}
        Err(ClientError::Impostor(socket)) => {
            tracing::warn!(
                "the process on {} could not prove it is this vault's agent; replacing it",
                socket.display()
            );
        }
        Err(e) => return Err(e),
    }
    let vault_id = paths
        .read_id()
        .map_err(|e| ClientError::Protocol(e.to_string()))?;
    super::handoff::start_agent(paths, &vault_id, keys, super::DEFAULT_LIFETIME)
        .map_err(|e| ClientError::Protocol(e.to_string()))?;
    Client::connect_verified(paths, &proof_key)?.ok_or(ClientError::Gone)
}

impl Client {
    /// Signs `verdict` for the action in `v`, after checking that its request hashes to the
    /// action's hash, and has the agent record it.
    pub fn decide(
        &mut self,
        keys: &KeyMaterial,
        v: &ApprovalView,
        verdict: &Verdict,
        grant_ttl: Duration,
    ) -> Result<Action, ClientError> {
        v.verified_request().map_err(ClientError::Protocol)?;
        let a = &v.action;
        let signed = crate::approvals::sign_decision(
            &keys.approver,
            &self.vault_id,
            &a.id,
            &a.action_hash,
            (&a.credential_id, a.credential_version),
            &a.expires_at,
            verdict,
            grant_ttl,
        );
        match self.call(Request::Decide { decision: signed })? {
            Reply::Action(a) => Ok(a),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }
}

/// Tells the agent listening on `socket` to stop, and waits until it let go of the vault (the
/// agent lock is free). An impostor that does not stop is simply replaced: the new agent binds
/// the path afresh.
/// Returns whether an agent answered.
pub fn stop_running(paths: &VaultPaths, socket: &Path) -> bool {
    let Ok(Some((mut c, _))) = Client::connect_to(socket, Role::Cli, None) else {
        return false;
    };
    if c.call(Request::Lock).is_err() {
        return false;
    }
    c.wait_closed(Duration::from_secs(15));
    // The agent lets go of its lock as it exits; wait for that too (bounded).
    let _ = super::take_lock(paths, Duration::from_secs(15));
    true
}
