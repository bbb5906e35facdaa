//! Starting an agent and handing it the key: the person's `vault unlock` / `vault approve` /
//! `vault init` spawns `vault agent --handoff` with a clean environment and one end of a
//! socketpair as its stdin, writes the key down that channel (never the filesystem socket, where
//! an impostor may listen) and reads back where the agent listens. The child reads the key only
//! after it hardened itself.
use super::client::{Client, ClientError};
use super::protocol::{AgentStatus, Role};
use super::AgentError;
use crate::keys::KeyMaterial;
use crate::paths::VaultPaths;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use zeroize::Zeroizing;

/// The environment an agent keeps: nothing a loader or a proxy reads.
const KEPT_ENV: &[&str] = &[
    "VAULT_LOG",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "TZ",
    "NO_COLOR",
];

/// How large the agent's log may grow before a new agent starts it afresh.
const LOG_LIMIT: u64 = 1 << 20;

/// What goes down the channel: one JSON line.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Handoff {
    v: u32,
    vault_id: String,
    master_key: Zeroizing<String>,
    approver_public_key: String,
    lifetime_s: u64,
    socket: String,
}

/// What comes back.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Ready {
    ok: bool,
    status: Option<AgentStatus>,
    error: Option<String>,
}

/// What `start_agent` does when an agent already holds the vault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfRunning {
    /// Leave it, and start nothing (`AgentError::Running`): `vault unlock` without `--restart`.
    Keep,
    /// Stop it (it withdraws and answers the calls that wait, and tells the person's commands a
    /// new agent follows), then start the new one: `vault unlock --restart`.
    Restart,
    /// Stop it as `vault lock` would: what answers on the socket could not prove it holds the
    /// key (`vault approve` finding an impostor).
    Replace,
}

/// Starts an agent holding `keys.master`, trusting `keys.approver`'s public key, after stopping
/// a running one unless `if_running` keeps it. Returns the new agent's status.
pub fn start_agent(
    paths: &VaultPaths,
    vault_id: &str,
    keys: &KeyMaterial,
    lifetime: Duration,
    if_running: IfRunning,
) -> Result<AgentStatus, AgentError> {
    let socket = super::socket::socket_path(vault_id);
    let order = match if_running {
        IfRunning::Keep => match super::holder::holder(paths) {
            super::holder::Holder::Nobody => None,
            super::holder::Holder::Pid(pid) => return Err(AgentError::Running(Some(pid))),
            super::holder::Holder::Unknown => return Err(AgentError::Running(None)),
        },
        IfRunning::Restart => Some(super::holder::Order::Restart),
        IfRunning::Replace => Some(super::holder::Order::Lock),
    };
    if let Some(order) = order {
        if super::client::stop_running_for(paths, order) == super::holder::Stopped::Unreachable {
            return Err(AgentError::StillRunning(15));
        }
    }
    let (ours, theirs) = UnixStream::pair()?;
    let exe = std::env::current_exe()?;
    let log = open_log(&paths.dir().join("agent.log"))?;
    let mut cmd = Command::new(exe);
    cmd.arg("--vault-dir")
        .arg(paths.dir())
        .arg("agent")
        .arg("--handoff")
        .env_clear()
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .stdout(Stdio::null())
        .stderr(Stdio::from(log));
    // A `mutation` build (`.ci/mutants` only) hands its guard switches on to the agent too.
    let mutants: &[&str] = if cfg!(feature = "mutation") {
        &["AV_MUTATE"]
    } else {
        &[]
    };
    for k in KEPT_ENV.iter().chain(mutants) {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    let _child = cmd.spawn()?;
    let handoff = Handoff {
        v: 1,
        vault_id: vault_id.to_owned(),
        master_key: keys.master.to_hex(),
        approver_public_key: keys.approver.public_hex(),
        lifetime_s: lifetime.as_secs(),
        socket: socket.display().to_string(),
    };
    let line = super::protocol::encode(&handoff);
    (&ours).write_all(&line)?;
    drop(line);
    ours.set_read_timeout(Some(Duration::from_secs(40)))?;
    let mut reply = String::new();
    BufReader::new(&ours).read_line(&mut reply)?;
    let ready: Ready = serde_json::from_str(&reply).map_err(|_| {
        AgentError::Start(format!(
            "it ended without saying why; see {}",
            paths.dir().join("agent.log").display()
        ))
    })?;
    match (ready.ok, ready.status) {
        (true, Some(status)) => Ok(status),
        _ => Err(AgentError::Start(
            ready.error.unwrap_or_else(|| "no reason given".into()),
        )),
    }
}

fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let big = std::fs::metadata(path).is_ok_and(|m| m.len() > LOG_LIMIT);
    std::fs::OpenOptions::new()
        .create(true)
        .append(!big)
        .write(true)
        .truncate(big)
        .mode(0o600)
        .open(path)
}

/// The child's side: reads the handoff from stdin (the inherited channel). Call only after
/// `super::harden`.
pub fn receive(paths: &VaultPaths) -> Result<super::Start, AgentError> {
    // Read straight from the descriptor into wiped memory (std's stdin would keep a copy in its
    // buffer).
    let mut line = Zeroizing::new(Vec::with_capacity(64 * 1024 + 256));
    let mut byte = [0u8; 256];
    while !line.contains(&b'\n') && line.len() < 64 * 1024 {
        match rustix::io::read(std::io::stdin(), &mut byte) {
            Ok(0) => break,
            Ok(n) => line.extend_from_slice(&byte[..n]),
            Err(e) if e == rustix::io::Errno::INTR => continue,
            Err(e) => return Err(AgentError::Io(e.into())),
        }
    }
    zeroize::Zeroize::zeroize(&mut byte);
    let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
    let h: Handoff = serde_json::from_slice(&line[..end])
        .map_err(|_| AgentError::Start("the key handoff was not readable".into()))?;
    let master = crate::keys::MasterKey::from_hex(&h.master_key)
        .ok_or_else(|| AgentError::Start("the handed-over key is malformed".into()))?;
    let approver: [u8; 32] = hex::decode(&h.approver_public_key)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| AgentError::Start("the approver key is malformed".into()))?;
    let approver = ed25519_dalek::VerifyingKey::from_bytes(&approver)
        .map_err(|_| AgentError::Start("the approver key is malformed".into()))?;
    Ok(super::Start {
        paths: paths.clone(),
        socket: h.socket.into(),
        master,
        trust: crate::approvals::Trust {
            vault_id: h.vault_id,
            approver,
        },
        lifetime: Duration::from_secs(h.lifetime_s.max(1)),
    })
}

/// The child's answer on the channel, then the channel is replaced by `/dev/null`.
pub fn answer(result: Result<&AgentStatus, &AgentError>) {
    let ready = match result {
        Ok(s) => Ready {
            ok: true,
            status: Some(s.clone()),
            error: None,
        },
        Err(e) => Ready {
            ok: false,
            status: None,
            error: Some(e.to_string()),
        },
    };
    let line = super::protocol::encode(&ready);
    let _ = rustix::io::write(std::io::stdin(), &line);
    if let Ok(null) = std::fs::File::open("/dev/null") {
        let _ = rustix::stdio::dup2_stdin(&null);
    }
}

/// A connection to the vault's real agent over the encrypted channel (which only a process that
/// holds the vault's key can open). If none runs (or an impostor holds the socket path), a new
/// agent is started with the key.
pub fn approver_client(paths: &VaultPaths, keys: &KeyMaterial) -> Result<Client, ClientError> {
    let psk = super::channel::channel_key(&keys.master);
    match Client::connect_secure(paths, &psk, Role::Approver) {
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
    start_agent(
        paths,
        &vault_id,
        keys,
        super::DEFAULT_LIFETIME,
        IfRunning::Replace,
    )
    .map_err(|e| ClientError::Protocol(e.to_string()))?;
    Client::connect_secure(paths, &psk, Role::Approver)?.ok_or(ClientError::Gone)
}
