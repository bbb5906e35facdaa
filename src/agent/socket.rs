//! Where the custody agent listens and who may talk to it: a per-user `0700` directory
//! (`$XDG_RUNTIME_DIR/agent-vault`, else `agent-vault-<uid>` under the temp dir) whose owner and
//! mode are checked before use, one socket per vault id, the peer's uid (`SO_PEERCRED`), pid and
//! executable for every connection, and a client's connect that gives up after a deadline.
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Errors about the socket directory.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("{path} is not safe for the agent's socket: {why}; remove it (or fix its owner/mode) and run `vault unlock` again")]
    Unsafe { path: PathBuf, why: String },
    #[error("cannot prepare {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// The directory that holds this user's agent sockets.
pub fn socket_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) if Path::new(&d).is_absolute() => PathBuf::from(d).join("agent-vault"),
        _ => std::env::temp_dir().join(format!("agent-vault-{}", uid())),
    }
}

/// The socket of the agent of vault `vault_id`.
pub fn socket_path(vault_id: &str) -> PathBuf {
    socket_dir().join(format!("{vault_id}.sock"))
}

/// Creates the socket directory (0700) if needed and checks it is ours, a real directory (not
/// a symlink) and closed to everyone else.
pub fn prepare_dir(dir: &Path) -> Result<(), SocketError> {
    let io_err = |source| SocketError::Io {
        path: dir.to_owned(),
        source,
    };
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err(e)),
    }
    check_dir(dir)
}

/// Owner, type and mode checks of the socket directory (also done by clients before connecting).
pub fn check_dir(dir: &Path) -> Result<(), SocketError> {
    let unsafe_because = |why: String| SocketError::Unsafe {
        path: dir.to_owned(),
        why,
    };
    let meta = fs::symlink_metadata(dir).map_err(|source| SocketError::Io {
        path: dir.to_owned(),
        source,
    })?;
    if !meta.file_type().is_dir() {
        return Err(unsafe_because("it is not a directory".into()));
    }
    if meta.uid() != uid() {
        return Err(unsafe_because(format!(
            "it belongs to uid {}, not to you (uid {})",
            meta.uid(),
            uid()
        )));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode != 0o700 {
        return Err(unsafe_because(format!("its mode is {mode:o}, not 700")));
    }
    Ok(())
}

/// Who is on the other end of a connection, as the kernel says.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Peer {
    pub uid: u32,
    pub pid: Option<u32>,
    pub exe: Option<String>,
    pub parent_pid: Option<u32>,
    pub parent_exe: Option<String>,
}

impl Peer {
    /// The peer of a connected Unix socket (uid from `SO_PEERCRED` / `getpeereid`).
    pub fn of(stream: &tokio::net::UnixStream) -> io::Result<Self> {
        let cred = stream.peer_cred()?;
        let pid = cred.pid().and_then(|p| u32::try_from(p).ok());
        let parent_pid = pid.and_then(parent_of);
        Ok(Self {
            uid: cred.uid(),
            pid,
            exe: pid.and_then(exe_of),
            parent_pid,
            parent_exe: parent_pid.and_then(exe_of),
        })
    }

    /// A process by pid (the contained peer `vault run`'s relay names): its uid from
    /// `/proc/PID/status`, its executable and parent as for a socket peer. `None` if it is gone.
    pub fn of_pid(pid: u32) -> Option<Self> {
        let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let uid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        let parent_pid = parent_of(pid);
        Some(Self {
            uid,
            pid: Some(pid),
            exe: exe_of(pid),
            parent_pid,
            parent_exe: parent_pid.and_then(exe_of),
        })
    }

    /// Whether the peer runs as this process's user.
    pub fn is_same_user(&self) -> bool {
        self.uid == uid()
    }

    /// The peer process, as the journal records it.
    pub fn process(&self) -> crate::wire::journal::Process {
        crate::wire::journal::Process {
            pid: self.pid,
            exe: self.exe.clone(),
        }
    }

    /// Its parent (the AI client, for `vault mcp`), as the journal records it.
    pub fn parent(&self) -> crate::wire::journal::Process {
        crate::wire::journal::Process {
            pid: self.parent_pid,
            exe: self.parent_exe.clone(),
        }
    }
}

fn exe_of(pid: u32) -> Option<String> {
    fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .map(|p| p.display().to_string())
}

fn parent_of(pid: u32) -> Option<u32> {
    crate::sys::proc_stat(pid).map(|(_, parent)| parent)
}

/// Whether an I/O error is a socket timeout running out.
pub(crate) fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// A stream connected to `socket` within `within`: a Unix socket whose queue of connections is
/// full makes `connect` wait (or, non-blocking, fail with `EAGAIN`), so it is tried again until
/// then, and `TimedOut` after.
pub(crate) fn connect_within(socket: &Path, within: Duration) -> std::io::Result<UnixStream> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )?;
    let addr = SocketAddrUnix::new(socket)?;
    let until = Instant::now() + within;
    loop {
        match rustix::net::connect(&fd, &addr) {
            Ok(()) => break,
            Err(e) if e == rustix::io::Errno::INTR => {}
            Err(e) if e == rustix::io::Errno::AGAIN && Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) if e == rustix::io::Errno::AGAIN => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the vault agent's socket accepted no connection in time",
                ))
            }
            Err(e) => return Err(e.into()),
        }
    }
    let stream = UnixStream::from(fd);
    stream.set_nonblocking(false)?;
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_dir_must_be_ours_and_closed() {
        let d = std::env::temp_dir().join(format!("av-sock-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        prepare_dir(&d).unwrap();
        assert_eq!(
            fs::metadata(&d).unwrap().permissions().mode() & 0o777,
            0o700
        );
        fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
        assert!(matches!(check_dir(&d), Err(SocketError::Unsafe { .. })));
        fs::remove_dir_all(&d).unwrap();
        let link = std::env::temp_dir().join(format!("av-sock-link-{}", std::process::id()));
        let _ = fs::remove_file(&link);
        std::os::unix::fs::symlink("/tmp", &link).unwrap();
        assert!(matches!(check_dir(&link), Err(SocketError::Unsafe { .. })));
        fs::remove_file(&link).unwrap();
    }

    #[test]
    fn parent_pid_parses_names_with_spaces() {
        assert_eq!(
            parent_of(std::process::id()),
            Some(std::os::unix::process::parent_id())
        );
    }

    #[test]
    fn a_connect_to_a_socket_that_accepts_nothing_gives_up_at_its_deadline() {
        use rustix::net::{AddressFamily, SocketAddrUnix, SocketType};
        let dir = std::env::temp_dir().join(format!("av-connect-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        // A listener with a queue of one that never accepts: what a stuck agent looks like.
        let listener = rustix::net::socket(AddressFamily::UNIX, SocketType::STREAM, None).unwrap();
        rustix::net::bind(&listener, &SocketAddrUnix::new(&path).unwrap()).unwrap();
        rustix::net::listen(&listener, 1).unwrap();
        let started = Instant::now();
        let mut held = Vec::new();
        let err = loop {
            match connect_within(&path, Duration::from_millis(300)) {
                Ok(s) => held.push(s),
                Err(e) => break e,
            }
            assert!(held.len() < 16, "the queue never filled");
        };
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
        let _ = fs::remove_dir_all(&dir);
    }
}
