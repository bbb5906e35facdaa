//! Each suspended call, performed by PID 1 on what it checked: the caller's path read once into
//! PID 1's memory, its directory looked up as the caller would (`resolve.rs`), the gate asked
//! about the name, the call's id checked still valid, and only then the call made on the
//! directory's descriptor with PID 1's copy of the name.
use super::{errno, Answer, Gate, Stop};
use crate::contain::calls::{At, Call, Dir};
use crate::contain::filter::CREATING;
use crate::contain::resolve::{own, Caller, Entry, Led};
use crate::sys::notify::Notification;
use rustix::fs::{self, AtFlags, FileType, Mode, OFlags, RenameFlags};
use std::os::fd::OwnedFd;

/// The caller's process and umask (`/proc/TID/status`).
pub(super) fn caller(tid: u32) -> Result<(Caller, u32), Stop> {
    // One read (the file is about 1.5 KiB): the fields wanted are in its first lines.
    let fd = fs::open(
        format!("/proc/{tid}/status"),
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|_| Stop::Gone)?;
    let mut buf = [0u8; 4096];
    let n = rustix::io::read(&fd, &mut buf).map_err(|_| Stop::Gone)?;
    drop(fd);
    let status = String::from_utf8_lossy(&buf[..n]);
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let tgid = field("Tgid:")
        .and_then(|v| v.parse().ok())
        .ok_or(Stop::Gone)?;
    let umask = field("Umask:")
        .and_then(|v| u32::from_str_radix(v, 8).ok())
        .unwrap_or(0o022);
    Ok((Caller { tid, tgid }, umask))
}

fn oflags(flags: i32) -> OFlags {
    OFlags::from_bits_retain(flags as u32)
}

/// Reopens what `obj` (an `O_PATH` descriptor) is, with `flags` less creation (nothing new is
/// made through it), as `/proc/self/fd/N`: the same object, opened for real.
fn reopen(obj: &OwnedFd, flags: i32) -> Result<OwnedFd, Stop> {
    let flags = flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW);
    fs::open(
        own(obj),
        oflags(flags) | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(errno)
}

impl Gate {
    /// Performs `call` for `n`'s caller, or says why not.
    pub(super) fn emulate(&mut self, n: &Notification, call: Call) -> Result<Answer, Stop> {
        let (c, umask) = caller(n.pid)?;
        let ok = Answer::Value(0);
        match call {
            Call::Open { at, flags, mode } => self.open(n, &c, umask, at, flags, mode),
            Call::Mkdir { at, mode } => {
                let e = c.entry(at.dir, &self.read(n, at.path)?)?;
                self.check_new(&e)?;
                self.valid(n)?;
                self.set_umask(umask);
                fs::mkdirat(&e.dir, e.arg(), Mode::from_raw_mode(mode)).map_err(errno)?;
                Ok(ok)
            }
            Call::Mknod { at, mode, dev } => {
                let kind = match mode & libc::S_IFMT {
                    0 => FileType::RegularFile,
                    t => match FileType::from_raw_mode(t) {
                        FileType::Directory | FileType::Symlink | FileType::Unknown => {
                            return Err(Stop::Errno(libc::EINVAL))
                        }
                        k => k,
                    },
                };
                let e = c.entry(at.dir, &self.read(n, at.path)?)?;
                self.check_new(&e)?;
                self.valid(n)?;
                self.set_umask(umask);
                fs::mknodat(&e.dir, e.arg(), kind, Mode::from_raw_mode(mode), dev)
                    .map_err(errno)?;
                Ok(ok)
            }
            Call::Symlink { target, new } => {
                let target = self.read(n, target)?;
                let e = c.entry(new.dir, &self.read(n, new.path)?)?;
                self.check_new(&e)?;
                self.valid(n)?;
                fs::symlinkat(target.as_slice(), &e.dir, e.arg()).map_err(errno)?;
                Ok(ok)
            }
            Call::Link { old, new, flags } => self.link(n, &c, old, new, flags),
            Call::Rename { old, new, flags } => {
                let o = c.entry(old.dir, &self.read(n, old.path)?)?;
                let e = c.entry(new.dir, &self.read(n, new.path)?)?;
                // Both names are judged (a protected path is not moved away, nor swapped with
                // RENAME_EXCHANGE), and so is a move across a git directory's border.
                self.check_move(&o, &e)?;
                if flags & libc::RENAME_EXCHANGE != 0 {
                    self.check_move(&e, &o)?;
                }
                self.valid(n)?;
                let flags = RenameFlags::from_bits_retain(flags);
                fs::renameat_with(&o.dir, o.arg(), &e.dir, e.arg(), flags).map_err(errno)?;
                Ok(ok)
            }
        }
    }

    fn open(
        &mut self,
        n: &Notification,
        c: &Caller,
        umask: u32,
        at: At,
        flags: i32,
        mode: u32,
    ) -> Result<Answer, Stop> {
        let path = self.read(n, at.path)?;
        let cloexec = flags & libc::O_CLOEXEC != 0;
        let mode = Mode::from_raw_mode(mode);
        let e = c.entry(at.dir, &path)?;
        if flags & libc::O_PATH != 0 || flags & CREATING & !libc::O_CREAT != 0 {
            // O_PATH ignores O_CREAT; O_TMPFILE makes an unnamed file in the directory the path
            // names (a later link of it is judged as any link).
            let obj = match c.follow(e)? {
                Led::Object(o) => o,
                Led::Missing(_) => return Err(Stop::Errno(libc::ENOENT)),
            };
            self.valid(n)?;
            let fd = if flags & libc::O_PATH != 0 {
                reopen(&obj, flags)?
            } else {
                self.set_umask(umask);
                fs::openat(&obj, ".", oflags(flags) | OFlags::CLOEXEC, mode).map_err(errno)?
            };
            return Ok(Answer::Fd { fd, cloexec });
        }
        // Refused whether or not the name is there: an open that may create also rewrites.
        self.check(&e)?;
        self.valid(n)?;
        self.set_umask(umask);
        let direct = oflags(flags) | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::CLOEXEC;
        let fd = match fs::openat(&e.dir, e.arg(), direct, mode) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::LOOP) if flags & libc::O_NOFOLLOW == 0 => {
                // A symbolic link, which the kernel would follow: to the object it names (in
                // `/proc`, the caller's), or to the name it would create, which is judged.
                match c.follow(e)? {
                    Led::Object(o) => {
                        self.valid(n)?;
                        reopen(&o, flags)?
                    }
                    Led::Missing(m) => {
                        self.check(&m)?;
                        self.valid(n)?;
                        fs::openat(&m.dir, m.arg(), direct, mode).map_err(errno)?
                    }
                }
            }
            Err(err) => return Err(errno(err)),
        };
        Ok(Answer::Fd { fd, cloexec })
    }

    fn link(
        &mut self,
        n: &Notification,
        c: &Caller,
        old: At,
        new: At,
        flags: i32,
    ) -> Result<Answer, Stop> {
        if flags & !(libc::AT_EMPTY_PATH | libc::AT_SYMLINK_FOLLOW) != 0 {
            return Err(Stop::Errno(libc::EINVAL));
        }
        let old_path = self.read(n, old.path)?;
        let e = c.entry(new.dir, &self.read(n, new.path)?)?;
        /// What is linked: a path (the caller's descriptor through `/proc`), an object PID 1
        /// holds, or a name not followed.
        enum From {
            Proc(String),
            Held(OwnedFd),
            Name(Entry),
        }
        let from = if old_path.is_empty() && flags & libc::AT_EMPTY_PATH != 0 {
            // The descriptor itself (an O_TMPFILE file, say), through the caller's magic link.
            match old.dir {
                Dir::Fd(fd) if fd >= 0 => From::Proc(format!("/proc/{}/fd/{fd}", c.tid)),
                Dir::Fd(_) => return Err(Stop::Errno(libc::EBADF)),
                Dir::Cwd => From::Proc(format!("/proc/{}/cwd", c.tid)),
            }
        } else {
            let o = c.entry(old.dir, &old_path)?;
            if flags & libc::AT_SYMLINK_FOLLOW != 0 {
                match c.follow(o)? {
                    Led::Object(obj) => From::Held(obj),
                    Led::Missing(_) => return Err(Stop::Errno(libc::ENOENT)),
                }
            } else {
                From::Name(o)
            }
        };
        self.check_new(&e)?;
        self.valid(n)?;
        let follow = AtFlags::SYMLINK_FOLLOW;
        match from {
            From::Proc(p) => fs::linkat(fs::CWD, p.as_str(), &e.dir, e.arg(), follow),
            From::Held(obj) => fs::linkat(fs::CWD, own(&obj).as_str(), &e.dir, e.arg(), follow),
            From::Name(o) => fs::linkat(&o.dir, o.arg(), &e.dir, e.arg(), AtFlags::empty()),
        }
        .map_err(errno)?;
        Ok(Answer::Value(0))
    }
}
