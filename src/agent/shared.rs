//! What the whole agent shares (`Agent`): the services, the keys, the status, the activity and
//! the stop signal that the service loop (`server.rs`) and every connection (`connection/`) hold,
//! and the agent's own paths (`OwnPaths`), checked against what its socket and lock file became.
use super::protocol::AgentStatus;
use super::AgentError;
use crate::services::tools::Env;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio::time::Instant;
use zeroize::Zeroizing;

/// What the whole agent shares.
pub(super) struct Agent {
    pub(super) env: Arc<Env>,
    /// The master key (locked in RAM where allowed): long reads (verify, export) open a
    /// connection of their own instead of holding up the writer.
    pub(super) master: crate::keys::MasterKey,
    /// The encrypted channel's pre-shared key (derived from the master key).
    pub(super) channel_key: Zeroizing<[u8; 32]>,
    pub(super) status: Mutex<AgentStatus>,
    pub(super) last_activity: Mutex<Instant>,
    pub(super) busy: AtomicUsize,
    pub(super) admission: Arc<super::admission::Admission>,
    pub(super) stop: watch::Sender<Option<&'static str>>,
    /// What the agent noticed about its own paths (told to every new connection and doctor).
    pub(super) noticed: Mutex<Vec<String>>,
    /// Its socket and lock file, to check that their paths still lead to them.
    pub(super) own: OwnPaths,
}

impl Agent {
    /// What every new connection is told: what the agent noticed about its own paths (checked
    /// now, so a command is told even before the next periodic check).
    pub(super) fn warnings(&self) -> Vec<String> {
        if let Some(why) = self.own.check(self) {
            self.stop(why);
        }
        self.noticed.lock().map(|n| n.clone()).unwrap_or_default()
    }

    pub(super) fn touch(&self) {
        *self.last_activity.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }
    pub(super) fn stop(&self, why: &'static str) {
        self.stop.send_if_modified(|s| {
            if s.is_none() {
                *s = Some(why);
                true
            } else {
                false
            }
        });
    }
}

/// The agent's own socket and lock file, by device and inode: whether the paths still lead to
/// them is checked every second.
pub(super) struct OwnPaths {
    socket: std::path::PathBuf,
    socket_id: (u64, u64),
    lock: std::path::PathBuf,
    lock_id: (u64, u64),
}

impl OwnPaths {
    pub(super) fn of(
        socket: &std::path::Path,
        paths: &crate::paths::VaultPaths,
        lock: &std::fs::File,
    ) -> Result<Self, AgentError> {
        use std::os::unix::fs::MetadataExt;
        let s = std::fs::symlink_metadata(socket)?;
        let l = lock.metadata()?;
        Ok(Self {
            socket: socket.to_owned(),
            socket_id: (s.dev(), s.ino()),
            lock: paths.dir().join("agent.lock"),
            lock_id: (l.dev(), l.ino()),
        })
    }

    fn names(path: &std::path::Path, id: (u64, u64)) -> bool {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(path).is_ok_and(|m| (m.dev(), m.ino()) == id)
    }

    /// What changed: a moved socket is told to every command (the encrypted channel still
    /// protects those given the passphrase); a replaced lock file stops the agent, since the kill
    /// switches find the agent by that file and could then be made to miss it.
    pub(super) fn check(&self, agent: &Agent) -> Option<&'static str> {
        if !Self::names(&self.lock, self.lock_id) {
            tracing::error!(path = %self.lock.display(), "the agent lock file was moved or replaced; locking the vault");
            return Some("agent.lock replaced");
        }
        let moved = !Self::names(&self.socket, self.socket_id);
        let mut noticed = agent.noticed.lock().unwrap_or_else(|p| p.into_inner());
        if moved && noticed.is_empty() {
            tracing::warn!(path = %self.socket.display(), "the socket path no longer leads to this agent");
            noticed.push(format!(
                "the socket path {} no longer leads to the vault agent (pid {}): something moved or replaced it, and may be relaying what other commands send. Commands given the passphrase still reach the agent safely over the encrypted channel. `vault lock`, then `vault unlock`, takes the path back",
                self.socket.display(),
                std::process::id()
            ));
        }
        None
    }
}
