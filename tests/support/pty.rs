//! A command on a real pseudo-terminal that the test drives while it runs (unlike
//! `pty_drive.py`, which returns only when the command ended): the terminal is the command's
//! controlling terminal, stdout and stderr (stdin too, unless it is given as a pipe), its output
//! is collected as it comes, and the test can look at the process while it waits at a prompt.
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct PtySession {
    child: Child,
    master: File,
    out: Arc<Mutex<Vec<u8>>>,
    /// Set once the reader has read the terminal to its end (every other end closed).
    drained: Arc<AtomicBool>,
    /// Where the last `wait_for` found its text.
    seen: usize,
}

fn check(r: libc::c_int, what: &str) {
    assert!(r >= 0, "{what}: {}", std::io::Error::last_os_error());
}

impl PtySession {
    /// Starts `cmd` on a new 40x120 terminal; `stdin`, if given, is piped to it instead.
    pub fn spawn(mut cmd: Command, stdin: Option<&str>) -> Self {
        // SAFETY: plain libc calls on descriptors this function owns; ptsname_r writes into a
        // buffer of the length it is given.
        let (master, slave) = unsafe {
            let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            check(m, "posix_openpt");
            check(libc::grantpt(m), "grantpt");
            check(libc::unlockpt(m), "unlockpt");
            let mut name = [0 as libc::c_char; 128];
            check(
                libc::ptsname_r(m, name.as_mut_ptr(), name.len()),
                "ptsname_r",
            );
            let s = libc::open(
                name.as_ptr(),
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
            );
            check(s, "open the terminal");
            let size = libc::winsize {
                ws_row: 40,
                ws_col: 120,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            check(libc::ioctl(m, libc::TIOCSWINSZ, &size), "TIOCSWINSZ");
            (File::from_raw_fd(m), File::from_raw_fd(s))
        };
        cmd.stdout(slave.try_clone().unwrap())
            .stderr(slave.try_clone().unwrap());
        match stdin {
            Some(_) => cmd.stdin(Stdio::piped()),
            None => cmd.stdin(slave.try_clone().unwrap()),
        };
        // SAFETY: setsid and ioctl are async-signal-safe; the child makes the terminal (its
        // stdout) its controlling terminal in a session of its own.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(1, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().expect("spawn on the terminal");
        drop(cmd);
        drop(slave);
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            let _ = pipe.write_all(text.as_bytes());
        }
        let out = Arc::new(Mutex::new(Vec::new()));
        let (mut reader, sink) = (master.try_clone().unwrap(), out.clone());
        let drained = Arc::new(AtomicBool::new(false));
        let done = drained.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once the terminal's last other end closed.
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
            done.store(true, Ordering::SeqCst);
        });
        Self {
            child,
            master,
            out,
            drained,
            seen: 0,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the command wrote so far.
    pub fn output(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    /// Waits until `text` appears (case-insensitive) after the previous match; false when the
    /// command ended or `timeout` passed first.
    pub fn wait_for(&mut self, text: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let want = text.to_ascii_lowercase();
        loop {
            let out = self.output().to_ascii_lowercase();
            if let Some(at) = out.get(self.seen..).and_then(|rest| rest.find(&want)) {
                self.seen += at + want.len();
                return true;
            }
            let ended = self.child.try_wait().unwrap().is_some();
            if ended || Instant::now() > deadline {
                // The last output may have arrived just before the end.
                std::thread::sleep(Duration::from_millis(100));
                return self.output().to_ascii_lowercase()[self.seen..].contains(&want);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sets the terminal's size (the kernel tells the command with SIGWINCH).
    pub fn resize(&mut self, rows: u16, cols: u16) {
        use std::os::fd::AsRawFd;
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads a winsize from the pointer it is given.
        check(
            unsafe { libc::ioctl(self.master.as_raw_fd(), libc::TIOCSWINSZ, &size) },
            "TIOCSWINSZ",
        );
    }

    /// Types `keys`.
    pub fn send(&mut self, keys: &str) {
        let _ = self.master.write_all(keys.as_bytes());
    }

    /// Waits up to `timeout` for the command to end (killing it after that); its exit code.
    /// What it wrote last is read before this returns: a command's exit does not wait for the
    /// reader, whose last bytes could otherwise be missing from `output` (seen in CI: `vault
    /// init`'s closing lines). A process it left holding the terminal bounds that wait at 2 s.
    pub fn finish(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(s) = self.child.try_wait().unwrap() {
                let drained = Instant::now() + Duration::from_secs(2);
                while !self.drained.load(Ordering::SeqCst) && Instant::now() < drained {
                    std::thread::sleep(Duration::from_millis(5));
                }
                return s.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

impl Drop for PtySession {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
