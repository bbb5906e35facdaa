//! `vault agent`, the custody process: the only long-lived holder of the vault's key, the only
//! process that reads a secret, and the one that runs the executors. It hardens itself before it
//! gets a key (undumpable, no core, inherited descriptors closed, `LD_*`/`DYLD_*` dropped, cwd
//! `/`), receives the key over a channel inherited at spawn (never over the filesystem socket),
//! takes the vault's agent lock (one agent per vault), serves a Unix socket with the typed
//! protocol of `protocol`, and exits on `vault lock`, after its lifetime or when idle.
mod admission;
pub mod channel;
pub mod client;
mod connection;
pub mod handoff;
pub mod holder;
pub mod protocol;
mod server;
mod shared;
pub mod socket;

use crate::approvals::Trust;
use crate::keys::MasterKey;
use crate::paths::VaultPaths;
use crate::store::{Store, StoreError};
use std::path::PathBuf;
use std::time::Duration;

/// The lifetime `vault unlock` gives an agent unless `--for` says otherwise.
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(8 * 3600);

/// Errors starting or running the agent.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("another vault agent for this vault did not stop within {0} s; run `vault lock`, then try again")]
    StillRunning(u64),
    #[error("a vault agent{} already holds this vault; `vault unlock --restart` replaces it", .0.map_or(String::new(), |p| format!(" (pid {p})")))]
    Running(Option<u32>),
    #[error("the agent could not start: {0}")]
    Start(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Socket(#[from] socket::SocketError),
    #[error("agent I/O failed: {0}")]
    Io(#[from] std::io::Error),
}

/// What the agent needs to run, whoever started it.
pub struct Start {
    pub paths: VaultPaths,
    pub socket: PathBuf,
    pub master: MasterKey,
    pub trust: Trust,
    pub lifetime: Duration,
}

/// Hardening before any key is read: drop inherited descriptors and loader variables, refuse
/// inspection by same-user processes, leave the caller's directory.
pub fn harden() -> crate::sys::Hardening {
    if let Err(e) = crate::sys::close_inherited_fds(&[]) {
        tracing::warn!("could not close inherited descriptors: {e}");
    }
    let hardening = crate::sys::deny_inspection();
    // Room for every connection the agent admits (admission.rs), with files to spare.
    crate::sys::raise_fd_limit(2048);
    let loader: Vec<std::ffi::OsString> = std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| {
            let k = k.to_string_lossy();
            k.starts_with("LD_") || k.starts_with("DYLD_")
        })
        .collect();
    for k in loader {
        std::env::remove_var(k);
    }
    let _ = std::env::set_current_dir("/");
    hardening
}

/// Takes the vault's agent lock (`agent.lock` in the vault directory), waiting up to `wait` for a
/// stopping agent to let go. Held for the agent's whole life; the kernel releases it when the
/// process ends, however it ends, so a starting agent that holds it owns every unfinished action.
pub fn take_lock(paths: &VaultPaths, wait: Duration) -> Result<std::fs::File, AgentError> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(paths.dir().join("agent.lock"))?;
    let deadline = std::time::Instant::now() + wait;
    loop {
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(file),
            Err(e)
                if e == rustix::io::Errno::WOULDBLOCK && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
                return Err(AgentError::StillRunning(wait.as_secs()))
            }
            Err(e) => return Err(AgentError::Io(e.into())),
        }
    }
}

/// Whether an agent holds this vault's lock right now. It asks with a shared lock, never the
/// agent's exclusive one: a probe that held it even for a moment would be taken, by a concurrent
/// `vault lock` reading `/proc/locks`, for the agent, and sent its signal.
pub fn is_running(paths: &VaultPaths) -> bool {
    let Ok(file) = std::fs::File::open(paths.dir().join("agent.lock")) else {
        return false;
    };
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockShared)
        == Err(rustix::io::Errno::WOULDBLOCK)
}

/// Opens the store for the agent: the trusted approver key must be the database's, orphans of a
/// previous agent are closed, and `vault.unlock` is journaled.
fn open_store(start: &Start, hardening: &crate::sys::Hardening) -> Result<Store, AgentError> {
    let mut store = Store::open(&start.paths.db(), &start.master)?;
    start.trust.check_store(store.conn())?;
    match crate::approvals::reap_orphans(&mut store) {
        Ok(0) => {}
        Ok(n) => tracing::info!("{n} actions of a previous agent were closed"),
        Err(e) => return Err(AgentError::Start(format!("closing orphaned actions: {e}"))),
    }
    let tx = store.write()?;
    let body = crate::wire::journal::VaultUnlock {
        agent_pid: std::process::id(),
        lifetime_s: start.lifetime.as_secs(),
        hardening: *hardening,
    };
    crate::audit::append(&tx, None, None, &body).map_err(|e| AgentError::Start(e.to_string()))?;
    tx.commit()?;
    Ok(store)
}

/// Runs the agent until it is locked, its lifetime ends or it is idle. `ready` is told where it
/// listens (or why it could not start) once the socket is bound.
pub fn run(
    start: Start,
    hardening: crate::sys::Hardening,
    ready: impl FnOnce(Result<&protocol::AgentStatus, &AgentError>),
) -> Result<(), AgentError> {
    let lock = match take_lock(&start.paths, Duration::from_secs(15)) {
        Ok(l) => l,
        Err(e) => {
            ready(Err(&e));
            return Err(e);
        }
    };
    let store = match open_store(&start, &hardening) {
        Ok(s) => s,
        Err(e) => {
            ready(Err(&e));
            return Err(e);
        }
    };
    let result = server::serve(start, store, &lock, hardening, ready);
    drop(lock);
    result
}
