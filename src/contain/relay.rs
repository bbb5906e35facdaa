//! The one way from inside `vault run`'s sandbox to the vault: a Unix socket that `vault run`
//! listens on outside (in a `0700` directory of its own), bound inside at the path where `vault
//! mcp` looks for the agent. Each connection from inside becomes a connection to the agent that
//! first says, as `vault run`, which process it carries (`Request::Contained`): the agent marks
//! that session contained because of the channel it came on, never because of anything the
//! client said. Then bytes pass through unchanged both ways. Only a peer that descends from the
//! sandbox's first process is served: the socket can also be reached from outside through
//! `/proc/PID/root` of a contained process, and such a peer gets nothing, least of all the flag.
use crate::agent::client::Client;
use crate::paths::VaultPaths;
use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// The relay's listening socket, outside the sandbox.
pub struct Listener {
    dir: PathBuf,
    pub path: PathBuf,
    listener: UnixListener,
}

impl Listener {
    /// A fresh `0700` directory under `parent` with the socket in it.
    pub fn bind(parent: &Path) -> std::io::Result<Self> {
        let mut n = [0u8; 8];
        getrandom::fill(&mut n).map_err(|e| std::io::Error::other(e.to_string()))?;
        let dir = parent.join(format!("run-{}", hex::encode(n)));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        let path = dir.join("relay.sock");
        let listener = UnixListener::bind(&path)?;
        Ok(Self {
            dir,
            path,
            listener,
        })
    }

    /// Serves connections in threads of their own until the process ends; returns the names
    /// to remove once the sandbox holds its bind of the socket.
    /// `sandbox`: the pid (in this namespace) of the sandbox's first process, whose descendants
    /// are the only peers served.
    pub fn serve(self, paths: VaultPaths, mark: bool, sandbox: i32) -> Names {
        let Self {
            dir,
            path,
            listener,
        } = self;
        std::thread::spawn(move || {
            for inner in listener.incoming().flatten() {
                let paths = paths.clone();
                std::thread::spawn(move || relay(inner, &paths, mark, sandbox));
            }
        });
        Names { dir, path }
    }
}

/// Where the relay's socket is named outside.
pub struct Names {
    dir: PathBuf,
    path: PathBuf,
}

impl Names {
    /// Removes the socket's name and directory: the sandbox's bind keeps the socket reachable
    /// inside; outside, nothing names it any more.
    pub fn remove(&self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// One connection from inside: the agent is told which process it carries (unless the sandbox
/// is a weaker one, whose sessions are not marked), then bytes flow.
fn relay(inner: UnixStream, paths: &VaultPaths, mark: bool, sandbox: i32) {
    let pid = rustix::net::sockopt::socket_peercred(&inner)
        .ok()
        .map(|c| c.pid.as_raw_nonzero().get() as u32);
    let Some(pid) = pid else {
        return;
    };
    if !descends_from(pid, sandbox) && !crate::mutation::off("relay_ancestry") {
        tracing::warn!(
            pid,
            "refused a connection to the relay from a process outside the sandbox (through /proc/PID/root?)"
        );
        return;
    }
    let outer = match Client::contained_stream(paths, mark.then_some(pid)) {
        Ok(Some(s)) => s,
        Ok(None) => {
            tracing::debug!("no vault agent runs: the contained connection is closed");
            return;
        }
        Err(e) => {
            tracing::warn!("the vault agent refused a contained connection: {e}");
            return;
        }
    };
    let (Ok(inner2), Ok(outer2)) = (inner.try_clone(), outer.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || pipe(inner, outer2));
    pipe(outer, inner2);
    let _ = up.join();
}

/// Whether `pid` is `ancestor` or one of its descendants, by the parent links in `/proc` (a
/// process outside the sandbox never has the sandbox's first process among its ancestors: that
/// process's one child is the sandbox's PID 1, and everything PID 1's namespace holds descends
/// from it).
fn descends_from(pid: u32, ancestor: i32) -> bool {
    let mut p = pid as i64;
    for _ in 0..4096 {
        if p == i64::from(ancestor) {
            return true;
        }
        if p <= 1 {
            return false;
        }
        let Some((_, ppid)) = u32::try_from(p).ok().and_then(crate::sys::proc_stat) else {
            return false;
        };
        p = i64::from(ppid);
    }
    false
}

/// Copies `from` to `to` until `from` ends, then ends `to`'s writing side.
fn pipe(mut from: UnixStream, mut to: UnixStream) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}
