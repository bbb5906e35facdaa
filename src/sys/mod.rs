//! The operating-system calls behind process hardening, file modes and terminals: the only module
//! that may use `unsafe` (closing inherited descriptors, locking key pages, macOS
//! `PT_DENY_ATTACH`, `sandbox.rs`'s fork, namespaces and exec for `vault run`, `notify.rs`'s
//! seccomp user notification for its creation gate, and `bytes.rs`'s SSE2 loads for the
//! verifier's quote scan); everything else goes through `rustix`'s safe wrappers from here.
#![allow(unsafe_code)]

pub mod bytes;
#[cfg(target_os = "linux")]
pub mod notify;
#[cfg(target_os = "linux")]
pub mod sandbox;

use rustix::process::{Resource, Rlimit};
use std::io;

/// The umask this process started with, before `restrict_umask` (what `vault run` gives its
/// client: the person's, not ours).
static STARTED_WITH: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0o022);

/// Sets the process umask to 077 so nothing we (or SQLite) create is readable by others, and
/// remembers the one it had.
pub fn restrict_umask() {
    let was = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    // The first call records the person's; a later one would record our own 077.
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| STARTED_WITH.store(was.as_raw_mode(), std::sync::atomic::Ordering::Relaxed));
}

/// The umask this process started with.
pub fn started_umask() -> u32 {
    STARTED_WITH.load(std::sync::atomic::Ordering::Relaxed)
}

pub use crate::wire::Hardening;

/// Makes this process unreadable by other processes of the same user: no ptrace attach, no
/// `/proc/PID/mem`, `environ` or core dump. Call before any key is read.
pub fn deny_inspection() -> Hardening {
    if crate::mutation::off("undumpable") {
        return Hardening {
            undumpable: true,
            no_core: true,
            key_locked: false,
        };
    }
    let no_core = rustix::process::setrlimit(
        Resource::Core,
        Rlimit {
            current: Some(0),
            maximum: Some(0),
        },
    )
    .is_ok();
    Hardening {
        undumpable: set_undumpable(),
        no_core,
        key_locked: false,
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn set_undumpable() -> bool {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable).is_ok()
}

#[cfg(target_os = "macos")]
fn set_undumpable() -> bool {
    // PT_DENY_ATTACH: a debugger attaching later is refused and this process is not traceable.
    const PT_DENY_ATTACH: libc::c_int = 31;
    // SAFETY: ptrace(PT_DENY_ATTACH) takes no pointers; it only flags the calling process.
    unsafe { libc::ptrace(PT_DENY_ATTACH, 0, std::ptr::null_mut(), 0) == 0 }
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "macos")))]
fn set_undumpable() -> bool {
    false
}

/// Whether this process is currently undumpable (Linux; else what `deny_inspection` reported).
pub fn is_undumpable() -> Option<bool> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        rustix::process::dumpable_behavior()
            .ok()
            .map(|d| d == rustix::process::DumpableBehavior::NotDumpable)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        None
    }
}

/// Raises the soft limit of open descriptors to `want` (or the hard limit, if lower), so the
/// agent's connection limits, not the descriptor limit, decide who gets in. Best effort.
pub fn raise_fd_limit(want: u64) {
    let now = rustix::process::getrlimit(Resource::Nofile);
    let target = now.maximum.map_or(want, |m| m.min(want));
    if now.current.is_some_and(|c| c < target) {
        let _ = rustix::process::setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(target),
                maximum: now.maximum,
            },
        );
    }
}

/// The current core-dump size limit (None: unlimited).
pub fn core_limit() -> Option<u64> {
    rustix::process::getrlimit(Resource::Core).current
}

/// Closes every descriptor above stderr that this process inherited (a custody process keeps
/// nothing its parent's parent left open). Returns how many were closed.
pub fn close_inherited_fds(keep: &[i32]) -> io::Result<usize> {
    let dir = if cfg!(target_os = "macos") {
        "/dev/fd"
    } else {
        "/proc/self/fd"
    };
    let fds: Vec<i32> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2 && !keep.contains(fd))
        .collect();
    let mut closed = 0;
    for fd in fds {
        // The directory handle used above is among them, already closed: skip what is not open.
        if rustix::io::fcntl_getfd(unsafe { rustix::fd::BorrowedFd::borrow_raw(fd) }).is_err() {
            continue;
        }
        // SAFETY: `fd` is open, was inherited, and nothing in this process owns it (this runs
        // before the agent opens anything of its own).
        unsafe { rustix::io::close(fd) };
        closed += 1;
    }
    Ok(closed)
}

/// Locks the pages holding `bytes` in memory so they are never written to swap. Best effort:
/// `RLIMIT_MEMLOCK` may forbid it.
pub fn lock_in_memory(bytes: &[u8]) -> bool {
    if bytes.is_empty() {
        return true;
    }
    // SAFETY: mlock only pins the pages containing this live, borrowed range; it does not read
    // or write them, and the range stays valid for the duration of the call.
    unsafe { rustix::mm::mlock(bytes.as_ptr() as *mut std::ffi::c_void, bytes.len()).is_ok() }
}

/// Whether a process with this pid exists (signal 0). Only for diagnostics, never for deciding
/// that an action is orphaned: a zombie or a reused pid looks alive.
pub fn process_exists(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        Err(e) => e == rustix::io::Errno::PERM,
    }
}

/// The yama `ptrace_scope` setting (Linux), for `vault doctor`.
pub fn ptrace_scope() -> Option<u8> {
    std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// What this crate reads of a process's `/proc/PID/stat`: its state letter and its parent's pid
/// (`None`: no such process, or a line that does not parse). The peer checks, the sandbox's
/// ancestry walk and the agent's stop all read it here.
pub fn proc_stat(pid: u32) -> Option<(char, u32)> {
    stat_fields(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// `pid (comm) state ppid …`: the command name may hold any bytes, spaces and `)` included, so
/// it ends at the last `)`.
fn stat_fields(stat: &str) -> Option<(char, u32)> {
    let mut rest = stat.rsplit_once(')')?.1.split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some((state, ppid))
}

#[cfg(test)]
mod tests {
    use super::{proc_stat, stat_fields};

    #[test]
    fn a_stat_line_is_read_after_the_last_parenthesis() {
        assert_eq!(stat_fields("42 (bash) S 7 42 42 0"), Some(('S', 7)));
        // A command name that plays a stat line: `) R 1` inside it changes nothing.
        assert_eq!(stat_fields("42 (x) R 1 (y) Z 9 9 0"), Some(('Z', 9)));
        assert_eq!(stat_fields("42 (a b)) D 3 1"), Some(('D', 3)));
        for bad in ["", "42 (bash", "42 (bash)", "42 (bash) S", "42 (bash) S x"] {
            assert_eq!(stat_fields(bad), None, "{bad:?}");
        }
        let me = std::process::id();
        let (state, parent) = proc_stat(me).unwrap();
        // This process's first thread waits for the test threads: running or sleeping.
        assert!(matches!(state, 'R' | 'S'), "{state}");
        assert_eq!(parent, std::os::unix::process::parent_id());
    }
}
