//! seccomp user notification, for `vault run`'s creation gate (`contain/supervise.rs`): a filter
//! whose matching calls are suspended and sent to a listener descriptor; the supervisor receives
//! each, reads the path (and what else the call points to: times, an attribute's value) from the
//! caller's memory, and answers with a value, an errno, or a descriptor it opened (`ADDFD` with
//! `SEND`: the descriptor becomes the call's return value). It never answers "continue" (the
//! kernel would read the caller's memory again, after the check). The filter itself is built in
//! `contain` (plain `sock_filter` values, no `unsafe`).
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// One instruction of a classic BPF program.
pub type Insn = libc::sock_filter;

/// `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV` (Linux 5.19): once the supervisor has received a
/// call, only a fatal signal interrupts it, so an emulated call is never done twice (a signal
/// would otherwise restart the call after the supervisor performed it).
const WAIT_KILLABLE: libc::c_ulong = libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (Linux 6.6): the caller and the supervisor hand the CPU
/// to each other, which halves the cost of a notified call.
const SYNC_WAKE_UP: u64 = 1;

/// A suspended call: its id (for the answer), the caller's thread id (in the supervisor's PID
/// namespace), the call's number, architecture and arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notification {
    pub id: u64,
    pub pid: u32,
    pub nr: i32,
    pub arch: u32,
    pub args: [u64; 6],
}

/// The kernel's sizes of its notification structures (they may grow: the buffers follow them),
/// asked once.
fn sizes() -> io::Result<libc::seccomp_notif_sizes> {
    static SIZES: std::sync::OnceLock<libc::seccomp_notif_sizes> = std::sync::OnceLock::new();
    if let Some(s) = SIZES.get() {
        return Ok(*s);
    }
    let s = ask_sizes()?;
    Ok(*SIZES.get_or_init(|| s))
}

fn ask_sizes() -> io::Result<libc::seccomp_notif_sizes> {
    let mut s = libc::seccomp_notif_sizes {
        seccomp_notif: 0,
        seccomp_notif_resp: 0,
        seccomp_data: 0,
    };
    // SAFETY: SECCOMP_GET_NOTIF_SIZES writes one `seccomp_notif_sizes` to the pointer, which
    // points to a live, writable value of that type.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_NOTIF_SIZES,
            0,
            &mut s as *mut libc::seccomp_notif_sizes,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(s)
}

/// Installs `program` as a seccomp filter of this thread (and of everything it starts) with a
/// new listener, and returns the listener. No new privileges is set first, as the kernel asks.
pub fn install_listener(program: &[Insn]) -> io::Result<OwnedFd> {
    rustix::thread::set_no_new_privs(true)?;
    let prog = libc::sock_fprog {
        len: u16::try_from(program.len())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?,
        filter: program.as_ptr() as *mut Insn,
    };
    let install = |flags: libc::c_ulong| {
        // SAFETY: `prog` points to `program`, alive and unchanged for the call; the kernel
        // copies the instructions. The return value is a new descriptor or -1.
        unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | flags,
                &prog as *const libc::sock_fprog,
            )
        }
    };
    let mut fd = install(WAIT_KILLABLE);
    if fd < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        // Before 5.19: without the killable wait (a signal may then repeat an emulated call).
        fd = install(0);
    }
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Asks for synchronous wake-ups on `listener` (best effort: Linux 6.6 and later).
pub fn sync_wake_up(listener: BorrowedFd<'_>) {
    // SAFETY: SET_FLAGS reads its argument as a plain integer (the flags), not a pointer.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS as _,
            SYNC_WAKE_UP,
        )
    };
}

/// Waits for the next suspended call. `ENOENT`: the caller went away before it was received.
pub fn receive(listener: BorrowedFd<'_>) -> io::Result<Notification> {
    let size = usize::from(sizes()?.seccomp_notif).max(size_of::<libc::seccomp_notif>());
    // A zeroed buffer of the kernel's size (as it requires), aligned for `seccomp_notif`.
    let mut buf = vec![0u64; size.div_ceil(8)];
    loop {
        // SAFETY: RECV writes at most the kernel's `seccomp_notif` size, which `buf` holds.
        let rc = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV as _,
                buf.as_mut_ptr(),
            )
        };
        if rc == 0 {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    // SAFETY: `buf` is 8-byte aligned, at least as large as `seccomp_notif`, and initialised;
    // every bit pattern is a valid `seccomp_notif` (integers only).
    let n: libc::seccomp_notif = unsafe { std::ptr::read(buf.as_ptr() as *const _) };
    Ok(Notification {
        id: n.id,
        pid: n.pid,
        nr: n.data.nr,
        arch: n.data.arch,
        args: n.data.args,
    })
}

/// Whether call `id` is still waiting (its caller alive, the pid not reused).
pub fn id_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
    // SAFETY: ID_VALID reads one u64 from the pointer, which points to a live u64.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _,
            &id as *const u64,
        )
    };
    rc == 0
}

/// Answers call `id`: `Ok(value)` is its return value, `Err(errno)` its error.
pub fn answer(listener: BorrowedFd<'_>, id: u64, result: Result<i64, i32>) -> io::Result<()> {
    let size = usize::from(sizes()?.seccomp_notif_resp).max(size_of::<libc::seccomp_notif_resp>());
    let mut buf = vec![0u64; size.div_ceil(8)];
    let (val, error) = match result {
        Ok(v) => (v, 0),
        Err(e) => (0, -e),
    };
    let resp = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags: 0,
    };
    // SAFETY: `buf` is 8-byte aligned and at least `seccomp_notif_resp` large; the rest stays
    // zero, as the kernel requires of fields it knows and this code does not.
    unsafe { std::ptr::write(buf.as_mut_ptr() as *mut libc::seccomp_notif_resp, resp) };
    // SAFETY: SEND reads the kernel's `seccomp_notif_resp` size from `buf`, which holds it.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND as _,
            buf.as_ptr(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Answers call `id` with a copy of `fd` in the caller (`ADDFD` with `SEND`, Linux 5.14): the
/// caller's new descriptor number is the call's return value. Returns that number.
pub fn send_fd(
    listener: BorrowedFd<'_>,
    id: u64,
    fd: BorrowedFd<'_>,
    cloexec: bool,
) -> io::Result<i32> {
    let add = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
        srcfd: fd.as_raw_fd() as u32,
        newfd: 0,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: ADDFD reads one `seccomp_notif_addfd` from the pointer, which points to it.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ADDFD as _,
            &add as *const libc::seccomp_notif_addfd,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Reads process `pid`'s memory at `addr` into `buf`, as far as it is mapped: returns how many
/// bytes came (fewer than asked where a page that is not mapped ends the range).
fn read_remote(pid: u32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    // Every page size of Linux is a multiple of 4 KiB, so 4 KiB pieces never straddle a page.
    let page = 4096u64;
    // The remote range in pieces that do not cross a page: the kernel reads whole pieces only,
    // so a page that is not mapped then ends the read there rather than failing all of it.
    let mut remote = Vec::new();
    let (mut at, end) = (addr, addr.saturating_add(buf.len() as u64));
    while at < end {
        let next = ((at / page) + 1).saturating_mul(page).min(end);
        remote.push(libc::iovec {
            iov_base: at as *mut libc::c_void,
            iov_len: (next - at) as usize,
        });
        at = next;
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // The kernel takes at most IOV_MAX (1024) pieces a call: more is never asked here (4 MiB).
    if remote.len() > 1024 {
        return Err(io::Error::from_raw_os_error(libc::E2BIG));
    }
    // SAFETY: the local iovec covers `buf`, writable and `buf.len()` bytes long; the remote
    // iovecs name memory of the other process, which the kernel checks (it never touches ours
    // for them).
    let n = unsafe {
        libc::process_vm_readv(
            pid as libc::pid_t,
            &local,
            1,
            remote.as_ptr(),
            remote.len() as libc::c_ulong,
            0,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// The NUL-terminated string at `addr` in process `pid`'s memory (at most `PATH_MAX` bytes with
/// its NUL), without the NUL. `ENAMETOOLONG` when no NUL comes within that, `EFAULT` when the
/// string runs into memory that is not mapped.
pub fn read_string(pid: u32, addr: u64) -> io::Result<Vec<u8>> {
    const MAX: usize = libc::PATH_MAX as usize;
    let mut buf = vec![0u8; MAX];
    let n = read_remote(pid, addr, &mut buf)?;
    match buf[..n].iter().position(|b| *b == 0) {
        Some(len) => {
            buf.truncate(len);
            Ok(buf)
        }
        None if n < MAX => Err(io::Error::from_raw_os_error(libc::EFAULT)),
        None => Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG)),
    }
}

/// The `len` bytes at `addr` in process `pid`'s memory (a value or a structure a call points
/// to). `EFAULT` when any of them is not mapped.
pub fn read_bytes(pid: u32, addr: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    if len == 0 {
        return Ok(buf);
    }
    let n = read_remote(pid, addr, &mut buf)?;
    if n < len {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_string_is_read_from_a_process_up_to_its_nul_and_no_further() {
        let me = std::process::id();
        let s = c"/some/path/.git";
        assert_eq!(
            read_string(me, s.as_ptr() as u64).unwrap(),
            b"/some/path/.git"
        );
        let long = vec![b'a'; 5000];
        let e = read_string(me, long.as_ptr() as u64).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENAMETOOLONG));
        assert_eq!(
            read_string(me, 0).unwrap_err().raw_os_error(),
            Some(libc::EFAULT)
        );
    }

    #[test]
    fn bytes_are_read_from_a_process_exactly_or_not_at_all() {
        let me = std::process::id();
        let value = [7u8, 0, 9, 0, 0, 1];
        assert_eq!(read_bytes(me, value.as_ptr() as u64, 6).unwrap(), value);
        assert_eq!(read_bytes(me, 0, 0).unwrap(), Vec::<u8>::new());
        let e = read_bytes(me, 8, 4).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EFAULT));
        // Across a page, as a 64 KiB attribute value is.
        let big = vec![5u8; 70_000];
        assert_eq!(read_bytes(me, big.as_ptr() as u64, 70_000).unwrap(), big);
    }

    /// A child installs a filter that suspends `mkdirat`; the test, as its supervisor, takes
    /// the listener (`pidfd_getfd`), receives the call, reads its path and refuses it.
    #[test]
    fn a_suspended_call_is_received_read_and_answered() {
        let (r, w) = std::io::pipe().unwrap();
        let path = c"notify-test-dir";
        let nr = libc::SYS_mkdirat as u32;
        let program = [
            Insn {
                code: 0x20,
                jt: 0,
                jf: 0,
                k: 0,
            },
            Insn {
                code: 0x15,
                jt: 0,
                jf: 1,
                k: nr,
            },
            Insn {
                code: 0x06,
                jt: 0,
                jf: 0,
                k: libc::SECCOMP_RET_USER_NOTIF,
            },
            Insn {
                code: 0x06,
                jt: 0,
                jf: 0,
                k: libc::SECCOMP_RET_ALLOW,
            },
        ];
        // SAFETY: the child only makes raw calls (no allocation, no lock) and ends with _exit.
        let child = unsafe { libc::fork() };
        if child == 0 {
            let code = match install_listener(&program) {
                Ok(l) => {
                    let n = l.as_raw_fd().to_ne_bytes();
                    let _ = rustix::io::write(&w, &n);
                    // SAFETY: a plain mkdirat of a NUL-terminated path.
                    let rc = unsafe {
                        libc::syscall(libc::SYS_mkdirat, libc::AT_FDCWD, path.as_ptr(), 0o700)
                    };
                    if rc == 0 {
                        0
                    } else {
                        io::Error::last_os_error().raw_os_error().unwrap_or(1)
                    }
                }
                Err(_) => 99,
            };
            // SAFETY: ends the forked child at once.
            unsafe { libc::_exit(code) };
        }
        drop(w);
        let mut n = [0u8; 4];
        rustix::io::read(&r, &mut n).unwrap();
        let pid = rustix::process::Pid::from_raw(child).unwrap();
        let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).unwrap();
        let listener = rustix::process::pidfd_getfd(
            &pidfd,
            i32::from_ne_bytes(n),
            rustix::process::PidfdGetfdFlags::empty(),
        )
        .unwrap();
        let call = receive(listener.as_fd()).unwrap();
        assert_eq!(call.pid, child as u32);
        assert_eq!(call.nr as u32, nr);
        assert_eq!(call.args[0] as i32, libc::AT_FDCWD);
        assert_eq!(
            read_string(call.pid, call.args[1]).unwrap(),
            path.to_bytes()
        );
        assert!(id_valid(listener.as_fd(), call.id));
        answer(listener.as_fd(), call.id, Err(libc::EACCES)).unwrap();
        let (_, st) = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty())
            .unwrap()
            .unwrap();
        assert_eq!(st.exit_status(), Some(libc::EACCES));
        assert!(!id_valid(listener.as_fd(), call.id));
        assert!(!std::path::Path::new("notify-test-dir").exists());
    }
}
