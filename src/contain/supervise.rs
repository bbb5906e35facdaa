//! PID 1's loop once the client runs: it reaps every process of the namespace (it is init) until
//! the client ends, and answers each call the client's filter suspended (`filter.rs`): the call
//! that would create a name in the person's directories (decoded by `calls.rs`, performed in
//! `emulate.rs`) is checked against the gate (`gate.rs`), the call that would change a file's
//! mode, owner, times or extended attributes (`meta_calls.rs`, performed in `meta.rs`) against
//! the inodes the plan keeps (`Plan::kept`), and, when allowed, performed by PID 1 itself.
//!
//! Never "continue": the path a call names lives in the caller's memory, which another thread
//! (or process) can change between the check and the kernel's second read of it. So PID 1 reads
//! the path once, looks up its directory (`resolve.rs`), takes that directory's real path from
//! the descriptor, checks the name there, and makes the call on the descriptor with its own copy
//! of the name, under the caller's umask; an open's new descriptor is handed over (`ADDFD` with
//! `SEND`). PID 1 has dropped every capability first, and shares the client's Landlock domain,
//! so the kernel judges each emulated call as it would judge the client's.
use super::calls;
use super::gate::{GateRules, Refusal};
use super::meta_calls;
use super::resolve::{self, Entry};
use crate::sys::notify::{self, Notification};
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fs::{self, AtFlags, Mode, OFlags};
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// At most this many refusal lines are written in one run (each line once).
const MAX_LINES: usize = 50;

/// Why an emulated call did not succeed.
enum Stop {
    Errno(i32),
    Refused(Refusal),
    /// The caller's memory cannot be read (it made itself undumpable, or Yama forbids it):
    /// refused.
    Unreadable,
    /// The caller went away (or its id is stale).
    Gone,
}

impl From<i32> for Stop {
    fn from(e: i32) -> Self {
        Stop::Errno(e)
    }
}

fn errno(e: rustix::io::Errno) -> Stop {
    Stop::Errno(e.raw_os_error())
}

/// What an emulated call returns.
enum Answer {
    Value(i64),
    Fd { fd: OwnedFd, cloexec: bool },
}

/// Writes one refusal line to stderr (once per line, and at most `MAX_LINES`). PID 1 has no CLI
/// to print through: its stderr is `vault run`'s, and this line is the sandbox's own word to the
/// person, so it is written here rather than through `cli::out`.
fn say(said: &mut HashSet<String>, line: String) {
    if said.len() < MAX_LINES && !said.contains(&line) {
        let _ = writeln!(std::io::stderr(), "{line}");
        said.insert(line);
    }
}

/// Why reading the caller's memory failed, as a `Stop`.
fn unreadable(e: std::io::Error) -> Stop {
    match e.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => Stop::Unreadable,
        Some(libc::ESRCH) => Stop::Gone,
        Some(e) => Stop::Errno(e),
        None => Stop::Errno(libc::EIO),
    }
}

/// The gate's state in PID 1.
pub(super) struct Gate {
    listener: OwnedFd,
    rules: GateRules,
    /// Each tree's device and inode, to know it when reached through another mount.
    trees: Vec<(u64, u64, PathBuf)>,
    umask: Option<u32>,
    /// The inodes whose metadata does not change from inside (`kept_inodes`).
    kept: HashMap<(u64, u64), PathBuf>,
    said: HashSet<String>,
}

impl Gate {
    pub(super) fn new(
        listener: OwnedFd,
        rules: &GateRules,
        kept: HashMap<(u64, u64), PathBuf>,
    ) -> Self {
        notify::sync_wake_up(listener.as_fd());
        let trees = rules
            .trees
            .iter()
            .filter_map(|t| {
                let st = fs::stat(t).ok()?;
                Some((st.st_dev, st.st_ino, t.clone()))
            })
            .collect();
        Self {
            listener,
            rules: rules.clone(),
            trees,
            umask: None,
            kept,
            said: HashSet::new(),
        }
    }

    /// Receives one suspended call and answers it.
    fn serve(&mut self) {
        let Ok(n) = notify::receive(self.listener.as_fd()) else {
            return;
        };
        let result = match calls::decode(n.nr, &n.args) {
            Some(call) => self.emulate(&n, call),
            None => match meta_calls::decode(n.nr, &n.args) {
                Some(Ok(meta)) => self.change(&n, meta),
                Some(Err(e)) => Err(Stop::Errno(e)),
                None => Err(Stop::Errno(libc::ENOSYS)),
            },
        };
        let l = self.listener.as_fd();
        let _ = match result {
            Ok(Answer::Value(v)) => notify::answer(l, n.id, Ok(v)),
            Ok(Answer::Fd { fd, cloexec }) => match notify::send_fd(l, n.id, fd.as_fd(), cloexec) {
                Ok(_) => Ok(()),
                Err(e) => notify::answer(l, n.id, Err(e.raw_os_error().unwrap_or(libc::EIO))),
            },
            Err(Stop::Errno(e)) => notify::answer(l, n.id, Err(e)),
            Err(Stop::Refused(r)) => {
                say(&mut self.said, r.to_string());
                notify::answer(l, n.id, Err(r.errno()))
            }
            Err(Stop::Unreadable) => {
                let comm =
                    std::fs::read_to_string(format!("/proc/{}/comm", n.pid)).unwrap_or_default();
                say(
                    &mut self.said,
                    format!(
                        "vault run: refused a file creation or metadata change by process {} ({}): the sandbox cannot read the path it names (the process made itself undumpable, or kernel.yama.ptrace_scope is 2 or more); run that program outside `vault run`",
                        n.pid,
                        comm.trim()
                    ),
                );
                notify::answer(l, n.id, Err(libc::EACCES))
            }
            // Answered all the same: were the caller still there, it would wait for ever (for
            // a call that is gone, the kernel refuses the answer).
            Err(Stop::Gone) => notify::answer(l, n.id, Err(libc::ESRCH)),
        };
    }

    /// Reads a path argument of the caller's.
    fn read(&self, n: &Notification, addr: u64) -> Result<Vec<u8>, Stop> {
        notify::read_string(n.pid, addr).map_err(unreadable)
    }

    /// Reads `len` bytes the caller's call points to (times, an attribute's value).
    fn read_bytes(&self, n: &Notification, addr: u64, len: usize) -> Result<Vec<u8>, Stop> {
        notify::read_bytes(n.pid, addr, len).map_err(unreadable)
    }

    /// Whether the call still waits (checked after everything read from the caller, right
    /// before the call is made: its thread id cannot have been reused meanwhile).
    fn valid(&self, n: &Notification) -> Result<(), Stop> {
        if notify::id_valid(self.listener.as_fd(), n.id) {
            Ok(())
        } else {
            Err(Stop::Gone)
        }
    }

    /// Takes the caller's umask, so what PID 1 creates gets the modes the caller's call would.
    fn set_umask(&mut self, mask: u32) {
        if self.umask != Some(mask) {
            rustix::process::umask(Mode::from_raw_mode(mask));
            self.umask = Some(mask);
        }
    }

    /// The path of `dir` as the trees name it (a tree reached through another mount of the
    /// same directory is still that tree: Landlock's rule is on the directory, not the path).
    fn logical(&self, dir: &OwnedFd) -> Result<PathBuf, Stop> {
        let p = resolve::path_of(dir)?;
        if self.rules.trees.iter().any(|t| p.starts_with(t)) {
            return Ok(p);
        }
        let st = fs::fstat(dir).map_err(errno)?;
        if !self.trees.iter().any(|(dev, _, _)| *dev == st.st_dev) {
            return Ok(p);
        }
        let names: Vec<&OsStr> = p.iter().collect();
        let mut cur = (
            st.st_dev,
            st.st_ino,
            dir.try_clone().map_err(|_| Stop::Errno(libc::EMFILE))?,
        );
        for depth in 0..names.len() {
            if let Some((_, _, t)) = self
                .trees
                .iter()
                .find(|(d, i, _)| (*d, *i) == (cur.0, cur.1))
            {
                return Ok(names[names.len() - depth..]
                    .iter()
                    .fold(t.clone(), |a, n| a.join(n)));
            }
            let up = fs::openat(
                &cur.2,
                "..",
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(errno)?;
            let su = fs::fstat(&up).map_err(errno)?;
            if (su.st_dev, su.st_ino) == (cur.0, cur.1) {
                break;
            }
            cur = (su.st_dev, su.st_ino, up);
        }
        Ok(p)
    }

    /// Refuses creating `e` where the gate says so.
    fn check(&self, e: &Entry) -> Result<(), Stop> {
        if !e.is_new_name() {
            return Ok(());
        }
        let abs = self.logical(&e.dir)?.join(OsStr::from_bytes(&e.name));
        match self.rules.refuses(&abs) {
            Some(r) => Err(Stop::Refused(r)),
            None => Ok(()),
        }
    }

    /// Refuses moving `from` to `to` where the gate says so.
    fn check_move(&self, from: &Entry, to: &Entry) -> Result<(), Stop> {
        let abs = |e: &Entry| -> Result<PathBuf, Stop> {
            let dir = self.logical(&e.dir)?;
            Ok(if e.is_new_name() {
                dir.join(OsStr::from_bytes(&e.name))
            } else {
                dir
            })
        };
        match self.rules.refuses_move(&abs(from)?, &abs(to)?) {
            Some(r) => Err(Stop::Refused(r)),
            None => Ok(()),
        }
    }

    /// As `check`, for a call that makes a new name only: where the name is there already the
    /// kernel's own answer (`EEXIST`) is the truth, and nothing is made (`mkdir -p` through an
    /// existing repository goes on).
    fn check_new(&self, e: &Entry) -> Result<(), Stop> {
        match self.check(e) {
            Err(Stop::Refused(_))
                if fs::statat(&e.dir, e.name.as_slice(), AtFlags::SYMLINK_NOFOLLOW).is_ok() =>
            {
                Err(Stop::Errno(libc::EEXIST))
            }
            r => r,
        }
    }
}

mod emulate;
mod meta;
pub(super) use meta::kept_inodes;

/// In the client's child, just before `exec`: installs the gate's filter (`program`) and sends
/// its listener to PID 1 over `to` (`SCM_RIGHTS`). The child keeps no copy.
pub(super) fn hand_over(program: &[notify::Insn], to: OwnedFd) -> Result<(), String> {
    use rustix::net::{sendmsg, SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let listener = notify::install_listener(program)
        .map_err(|e| format!("installing its seccomp filter with a listener: {e}; it needs a kernel built with seccomp filters (CONFIG_SECCOMP_FILTER), Linux 5.14 or later"))?;
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    let fds = [listener.as_fd()];
    cmsg.push(SendAncillaryMessage::ScmRights(&fds));
    sendmsg(
        &to,
        &[std::io::IoSlice::new(b"L")],
        &mut cmsg,
        SendFlags::empty(),
    )
    .map_err(|e| format!("handing its listener to PID 1: {e}"))?;
    Ok(())
}

/// In PID 1: the listener the client's child sent, or None if it ended first (it reports why).
pub(super) fn take_listener(from: &OwnedFd) -> Option<OwnedFd> {
    use rustix::net::{recvmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut cmsg = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    recvmsg(from, &mut iov, &mut cmsg, RecvFlags::CMSG_CLOEXEC).ok()?;
    cmsg.drain().find_map(|m| match m {
        RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
        _ => None,
    })
}

/// Drops every capability PID 1 holds in the sandbox's user namespace: from here on the
/// kernel judges what it does (the calls it performs for the client above all) as it judges
/// the client.
pub(super) fn drop_capabilities() -> std::io::Result<()> {
    use rustix::thread::{set_capabilities, CapabilitySet, CapabilitySets};
    set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )?;
    Ok(())
}

/// Reaps every process of the namespace until `client` ends, answering the gate's suspended
/// calls meanwhile (`gate`: None when it is off); returns the client's exit code.
pub(super) fn supervise(mut gate: Option<Gate>, client: i32) -> i32 {
    let Some(pid) = rustix::process::Pid::from_raw(client) else {
        return 1;
    };
    // The client's end wakes the loop at once; an orphan's within the poll's timeout.
    let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok();
    let tick = Timespec {
        tv_sec: 0,
        tv_nsec: 200_000_000,
    };
    // Reaped when the client's pidfd or the tick wakes the loop, and after every 64 calls
    // served (a busy gate must not leave orphans unreaped); not after each call (one more
    // system call each).
    let (mut reap, mut served) = (true, 0u32);
    loop {
        while reap {
            match rustix::process::wait(rustix::process::WaitOptions::NOHANG) {
                Ok(Some((p, st))) if p == pid => return super::code_of(st),
                Ok(Some(_)) => {}
                Ok(None) => reap = false,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return 1,
            }
        }
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(2);
        if let Some(g) = &gate {
            fds.push(PollFd::new(&g.listener, PollFlags::IN));
        }
        if let Some(p) = &pidfd {
            fds.push(PollFd::new(p, PollFlags::IN));
        }
        let woke = match poll(&mut fds, Some(&tick)) {
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => 0,
            Err(_) => return 1,
        };
        let ready = gate.as_ref().map(|_| fds[0].revents());
        let client_ended = pidfd.is_none() || !fds[fds.len() - 1].revents().is_empty();
        drop(fds);
        match ready {
            Some(r) if r.contains(PollFlags::IN) => {
                if let Some(g) = gate.as_mut() {
                    g.serve();
                    served += 1;
                }
            }
            // No process uses the filter any more: nothing will be suspended again.
            Some(r) if r.intersects(PollFlags::HUP | PollFlags::ERR) => gate = None,
            _ => {}
        }
        reap = woke == 0 || client_ended || gate.is_none() || served % 64 == 0;
    }
}
