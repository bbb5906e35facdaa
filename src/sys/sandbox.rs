//! The few calls `vault run` makes that no safe wrapper covers: `fork` (in a process that is
//! single-threaded at that moment), `unshare` of the user, mount, PID, IPC and network namespaces,
//! bringing up the new network namespace's loopback interface (an ioctl), signal
//! dispositions around the client, `execve`, `_exit` (a forked child never runs the parent's
//! destructors or atexit handlers), and the Landlock ABI the kernel speaks. Everything else of
//! the sandbox (mounts, `waitpid`, the death signal, Landlock rules, the seccomp filter) goes
//! through safe APIs in the `contain` module.
use std::ffi::CString;
use std::io;

/// Which side of a `fork` this process is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forked {
    Parent { child: i32 },
    Child,
}

/// `fork(2)`. The caller must be single-threaded (no thread of its own is running: the child
/// would get a copy of a lock held by a thread that does not exist there).
pub fn fork() -> io::Result<Forked> {
    // SAFETY: plain fork; the callers (`contain`) fork before starting any thread, so the child
    // is a complete copy of a single-threaded process and may allocate and run Rust code.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        child => Ok(Forked::Parent { child }),
    }
}

/// `_exit(2)`: ends a forked child at once, without unwinding or running the parent's exit
/// handlers (which would flush or delete what belongs to the parent).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and touches no memory of ours.
    unsafe { libc::_exit(code) }
}

/// The namespaces `vault run` gives the client.
pub const NEW_NAMESPACES: i32 =
    libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC;

/// With the network contained: a network namespace of its own, whose only interface is `lo`.
pub const NEW_NETWORK: i32 = libc::CLONE_NEWNET;

/// `unshare(2)` of `flags` (`NEW_NAMESPACES`, and `NEW_NETWORK`): this process moves into a new
/// user, mount and IPC namespace; its next child is PID 1 of a new PID namespace.
pub fn unshare(flags: i32) -> io::Result<()> {
    // SAFETY: unshare of namespaces only (no CLONE_FILES/CLONE_FS sharing changes that could
    // invalidate references this process holds).
    if unsafe { libc::unshare(flags) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// What a signal does in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    Default,
    Ignore,
}

/// Sets the disposition of `sig` (a wrapper ignores the terminal's SIGINT and SIGQUIT while its
/// client runs, as `system(3)` does; the client gets them back at their defaults).
pub fn set_signal(sig: i32, d: Disposition) {
    let handler = match d {
        Disposition::Default => libc::SIG_DFL,
        Disposition::Ignore => libc::SIG_IGN,
    };
    // SAFETY: SIG_DFL and SIG_IGN are not functions of ours; nothing runs in a handler.
    unsafe {
        libc::signal(sig, handler);
    }
}

/// `execve(2)` of `program` with `argv` and `env`; returns only on failure.
pub fn exec(program: &CString, argv: &[CString], env: &[CString]) -> io::Error {
    let mut args: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    args.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    // SAFETY: every pointer is a NUL-terminated string owned by the caller and alive across the
    // call; both arrays end with a null pointer.
    unsafe { libc::execve(program.as_ptr(), args.as_ptr(), envp.as_ptr()) };
    io::Error::last_os_error()
}

/// The Landlock ABI version the kernel speaks (0: none, or disabled).
pub fn landlock_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: landlock_create_ruleset with a null attribute, size 0 and the VERSION flag only
    // returns the ABI version (or an error); it reads and writes no memory.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).unwrap_or(0)
}

/// Marks every descriptor from `first` up close-on-exec (`close_range(2)` with
/// `CLOSE_RANGE_CLOEXEC`, Linux 5.11): the program exec'd next inherits none of them.
pub fn close_on_exec_from(first: u32) -> io::Result<()> {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range takes no pointers; with CLOSE_RANGE_CLOEXEC it closes nothing now,
    // it only sets FD_CLOEXEC on the descriptors of this (forked, about to exec) process.
    let r = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Brings up `lo` in this process's network namespace (a new one starts with it down and without
/// addresses; up, it has 127.0.0.1 and ::1). Needs CAP_NET_ADMIN over the namespace: PID 1 of
/// the sandbox has it until it drops its capabilities.
pub fn loopback_up() -> io::Result<()> {
    let sock = rustix::net::socket(
        rustix::net::AddressFamily::INET,
        rustix::net::SocketType::DGRAM,
        None,
    )?;
    // SAFETY: `ifreq` is plain data (zeroed is a valid value); the name fits with its NUL.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *d = *s as libc::c_char;
    }
    use std::os::fd::AsRawFd;
    // SAFETY: SIOCGIFFLAGS and SIOCSIFFLAGS read and write the `ifreq` passed, which lives
    // across both calls; the socket is open.
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) != 0 {
            return Err(io::Error::last_os_error());
        }
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
