//! Who the vault's agent is, from the kernel rather than from whatever answers on the socket
//! path: the process that holds `agent.lock` (`flock`, as `/proc/locks` lists it). The kill
//! switches reach that process with a signal, so a relay on the socket path, a moved socket or a
//! flood of connections cannot stop `vault lock` or `vault pause`; a client compares it with the
//! peer of its connection (`SO_PEERCRED`) to tell the agent from a process standing in between.
use crate::paths::VaultPaths;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

/// The holder of the vault's agent lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// Nobody holds it: no agent runs, the vault is locked.
    Nobody,
    /// This process holds it: the vault's agent.
    Pid(u32),
    /// Someone holds it but the kernel's list of locks cannot be read here (not Linux).
    Unknown,
}

/// The signals the agent answers (besides SIGTERM, a plain stop).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// SIGUSR1: `vault lock`: journal the lock, stop.
    Lock,
    /// SIGHUP: `vault unlock --restart`: the same, saying a new agent follows.
    Restart,
    /// SIGUSR2: `vault pause` when the socket cannot be used or trusted.
    Pause,
}

impl Order {
    fn signal(self) -> rustix::process::Signal {
        match self {
            Order::Lock => rustix::process::Signal::USR1,
            Order::Restart => rustix::process::Signal::HUP,
            Order::Pause => rustix::process::Signal::USR2,
        }
    }
}

/// Who holds `agent.lock` now. An agent that lets go between the two looks (the lock is held, then
/// its line is gone from `/proc/locks`) is looked at again, for at most a moment.
pub fn holder(paths: &VaultPaths) -> Holder {
    let deadline = Instant::now() + Duration::from_millis(500);
    loop {
        if !super::is_running(paths) {
            return Holder::Nobody;
        }
        let Ok(meta) = std::fs::metadata(paths.dir().join("agent.lock")) else {
            return Holder::Unknown;
        };
        let Ok(locks) = std::fs::read_to_string("/proc/locks") else {
            return Holder::Unknown;
        };
        if let Some(pid) = holder_in(&locks, meta.dev(), meta.ino()) {
            return Holder::Pid(pid);
        }
        if Instant::now() >= deadline {
            return Holder::Unknown;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The pid that holds a `FLOCK` write lock on the file (`dev`, `ino`) in `/proc/locks` text:
/// `1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF` (device as hex major:minor, inode in
/// decimal). Lines of waiters (`->`) are skipped.
fn holder_in(locks: &str, dev: u64, ino: u64) -> Option<u32> {
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    locks.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || f[1] != "FLOCK" || f[3] != "WRITE" {
            return None;
        }
        let mut id = f[5].split(':');
        let (maj, min, i) = (id.next()?, id.next()?, id.next()?);
        let same = u32::from_str_radix(maj, 16).ok()? == major
            && u32::from_str_radix(min, 16).ok()? == minor
            && i.parse::<u64>().ok()? == ino;
        same.then(|| f[4].parse().ok()).flatten()
    })
}

/// Sends `order` to the agent holding the lock. `false` when it could not be delivered.
pub fn send(pid: u32, order: Order) -> bool {
    rustix::process::Pid::from_raw(pid as i32)
        .is_some_and(|p| rustix::process::kill_process(p, order.signal()).is_ok())
}

/// How a stop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// No agent ran.
    NotRunning,
    /// The agent journaled the lock and let go of the vault.
    Locked(u32),
    /// It did not stop within the wait and was killed (its key went with it).
    Killed(u32),
    /// An agent holds the lock but its pid cannot be known here: nothing was sent.
    Unreachable,
}

/// Stops the vault's agent by signal (never through the socket, which may not be its own): asks
/// it to lock, waits up to `wait` for it to let go of the lock and end, and kills it if it does
/// not. It returns once the process has ended: every connection it had to the database closed.
pub fn stop(paths: &VaultPaths, wait: Duration) -> Stopped {
    stop_for(paths, wait, Order::Lock)
}

/// `stop` with the order the agent is given: `Lock`, or `Restart` (it tells its connections a
/// new agent follows).
pub fn stop_for(paths: &VaultPaths, wait: Duration, order: Order) -> Stopped {
    let pid = match holder(paths) {
        Holder::Nobody => return Stopped::NotRunning,
        Holder::Unknown => return Stopped::Unreachable,
        Holder::Pid(p) => p,
    };
    // Watched from before the signal, so that its end is its own and not a reused pid's.
    let watch = rustix::process::Pid::from_raw(pid as i32)
        .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok());
    if !send(pid, order) {
        return if super::is_running(paths) {
            Stopped::Unreachable
        } else {
            Stopped::NotRunning
        };
    }
    let deadline = Instant::now() + wait;
    // The lock goes first, the process a moment later: its last threads still close the
    // database. A stop returns once the process has ended, so what follows has the vault alone.
    if released(paths, wait) && ended(watch.as_ref(), pid, deadline) {
        return Stopped::Locked(pid);
    }
    if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let _ = released(paths, Duration::from_secs(5)) && ended(watch.as_ref(), pid, deadline);
    Stopped::Killed(pid)
}

/// Waits until process `pid` has ended, by `deadline`: every file of it closed by the kernel (it
/// is a zombie or gone). Through its pidfd where the kernel gives one, else by `/proc/PID/stat`.
fn ended(watch: Option<&std::os::fd::OwnedFd>, pid: u32, deadline: Instant) -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    if let Some(fd) = watch {
        let left = deadline.saturating_duration_since(Instant::now());
        let timeout = Timespec::try_from(left).unwrap_or(Timespec {
            tv_sec: 5,
            tv_nsec: 0,
        });
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        return loop {
            match poll(&mut fds, Some(&timeout)) {
                Ok(n) => break n > 0,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => break false,
            }
        };
    }
    loop {
        if !state_of(pid).is_some_and(|c| c != 'Z' && c != 'X') {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until nobody holds the lock, at most `wait` (an agent that is stopping lets go once its
/// connections had their grace period).
pub fn released(paths: &VaultPaths, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    loop {
        if !super::is_running(paths) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The state letter of process `pid` (`None`: no such process).
fn state_of(pid: u32) -> Option<char> {
    crate::sys::proc_stat(pid).map(|(state, _)| state)
}

/// The pid of the process listening on the other end of a connected Unix socket.
pub fn peer_pid(stream: &std::os::unix::net::UnixStream) -> Option<u32> {
    rustix::net::sockopt::socket_peercred(stream)
        .ok()
        .and_then(|c| u32::try_from(c.pid.as_raw_nonzero().get()).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_is_read_from_the_kernels_lock_list() {
        let dev = rustix::fs::makedev(0xfd, 1);
        let locks = "1: POSIX  ADVISORY  WRITE 11 fd:01:77 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 4242 fd:01:77 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 99 fd:01:77 0 EOF\n\
                     3: FLOCK  ADVISORY  WRITE 5 fd:02:77 0 EOF\n";
        assert_eq!(holder_in(locks, dev, 77), Some(4242));
        assert_eq!(holder_in(locks, dev, 78), None);
        assert_eq!(holder_in(locks, rustix::fs::makedev(0xfd, 3), 77), None);
    }

    /// A fresh, empty directory for a vault's agent lock.
    fn vault_dir(tag: &str) -> (std::path::PathBuf, VaultPaths) {
        let dir = std::env::temp_dir().join(format!("av-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        (dir.clone(), VaultPaths::new(dir))
    }

    #[test]
    fn a_probe_of_the_lock_is_never_taken_for_its_holder() {
        let (dir, paths) = vault_dir("probe");
        drop(super::super::take_lock(&paths, Duration::ZERO).unwrap());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let probe = {
            let (paths, stop) = (paths.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut running = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    running += usize::from(super::super::is_running(&paths));
                }
                running
            })
        };
        // No agent runs: whoever asks while another process probes is told so, every time.
        let deadline = Instant::now() + Duration::from_secs(1);
        let mut seen = Vec::new();
        while Instant::now() < deadline {
            let h = holder(&paths);
            if h != Holder::Nobody {
                seen.push(h);
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let running = probe.join().unwrap();
        seen.truncate(3);
        assert!(seen.is_empty(), "a probe was taken for the agent: {seen:?}");
        assert_eq!(running, 0, "the probe saw an agent");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_stop_returns_only_once_the_process_has_ended() {
        // A holder that lets go of the lock when told, then lingers with its files open for a
        // second (what an agent's last threads do while they close the database).
        let (dir, paths) = vault_dir("ended");
        let holder_py = "import fcntl, os, signal, sys, time\n\
                         f = open(sys.argv[1], 'a+')\n\
                         fcntl.flock(f, fcntl.LOCK_EX)\n\
                         def let_go(*_):\n    fcntl.flock(f, fcntl.LOCK_UN)\n    time.sleep(1)\n    os._exit(0)\n\
                         signal.signal(signal.SIGUSR1, let_go)\n\
                         print('held', flush=True)\n\
                         while True: time.sleep(60)\n";
        let mut child = std::process::Command::new("python3")
            .args(["-c", holder_py])
            .arg(paths.dir().join("agent.lock"))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "held");
        let stopped = stop(&paths, Duration::from_secs(10));
        // Ended: a zombie (this test is its parent), its files closed by the kernel.
        let after = state_of(child.id());
        let _ = child.kill();
        child.wait().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(stopped, Stopped::Locked(child.id()));
        assert_eq!(
            after,
            Some('Z'),
            "the stop returned while its process still ran"
        );
    }

    #[test]
    fn this_process_is_found_holding_a_lock() {
        let (dir, paths) = vault_dir("holder");
        assert_eq!(holder(&paths), Holder::Nobody);
        let lock = super::super::take_lock(&paths, Duration::ZERO).unwrap();
        // Held by this process; is_running opens its own description, so it sees it as taken.
        assert_eq!(holder(&paths), Holder::Pid(std::process::id()));
        drop(lock);
        assert_eq!(holder(&paths), Holder::Nobody);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
