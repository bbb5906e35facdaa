//! A suspended caller's paths, looked up by PID 1 as the caller would see them, so that PID 1
//! can perform the call itself on what it checked (`supervise.rs`). A relative path starts at
//! the caller's working directory or descriptor (`/proc/TID/cwd`, `/proc/TID/fd/N`).
//!
//! The one place where PID 1 and the caller see different things is `/proc`: `/proc/self`,
//! `/proc/thread-self`, `/dev/fd` and `/dev/stdout` name the process that looks, and PID 1's own
//! entries (its descriptors: the listener among them; its memory) must never be what an emulated
//! call opens and hands over. So a lookup that reaches `/proc` is done one component at a time,
//! with `self` and `thread-self` read as the caller's, and no other process's directory entered
//! (PID 1's included). Every other lookup is one `openat2` that follows no magic link: it cannot
//! go through `/proc/PID/fd/N`, `cwd` or `root`, and if it ends in `/proc` it is done again the
//! slow way. A metadata call's object is looked up the same way (`object`), or is the caller's
//! descriptor itself (`descriptor`).
use rustix::fs::{self, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;

use super::calls::Dir;

/// How many symbolic links one lookup follows, as the kernel's `MAXSYMLINKS`.
const MAX_LINKS: u32 = 40;

/// The thread whose call is suspended, and its process.
pub(super) struct Caller {
    pub tid: u32,
    pub tgid: u32,
}

/// A name in a directory: what a call creates, renames or links.
pub(super) struct Entry {
    pub dir: OwnedFd,
    /// One component (never empty), or "." when the path named a directory itself (`..`, `/`).
    pub name: Vec<u8>,
    /// The path ended with `/` (the kernel then wants a directory).
    pub slash: bool,
}

impl Entry {
    /// The name as the call takes it (with its slash).
    pub(super) fn arg(&self) -> Vec<u8> {
        let mut n = self.name.clone();
        if self.slash {
            n.push(b'/');
        }
        n
    }

    pub(super) fn is_new_name(&self) -> bool {
        self.name != b"."
    }
}

/// Where a followed name led.
pub(super) enum Led {
    /// The object (opened `O_PATH`).
    Object(OwnedFd),
    /// Nothing is there: the name that would be created, after following symbolic links.
    Missing(Entry),
}

fn errno(e: Errno) -> i32 {
    e.raw_os_error()
}

fn opath(dir: impl AsFd, name: &[u8], extra: OFlags) -> Result<OwnedFd, i32> {
    fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::CLOEXEC | extra,
        Mode::empty(),
    )
    .map_err(errno)
}

/// `/proc/self/fd/N` of one of PID 1's own descriptors (to reopen or link what it holds).
pub(super) fn own(fd: &impl AsRawFd) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

/// The absolute path of an open directory, as the view names it.
pub(super) fn path_of(fd: &impl AsRawFd) -> Result<PathBuf, i32> {
    let p = fs::readlink(own(fd), Vec::new()).map_err(errno)?;
    Ok(PathBuf::from(
        <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(p.into_bytes()),
    ))
}

impl Caller {
    /// Where `path` starts: `/` for an absolute path, else the caller's working directory or
    /// descriptor (ignored by the kernel, and here, when the path is absolute).
    fn start(&self, dir: Dir, path: &[u8]) -> Result<OwnedFd, i32> {
        if path.first() == Some(&b'/') {
            return opath(fs::CWD, b"/", OFlags::DIRECTORY);
        }
        match dir {
            Dir::Cwd => opath(
                fs::CWD,
                format!("/proc/{}/cwd", self.tid).as_bytes(),
                OFlags::empty(),
            ),
            Dir::Fd(n) if n >= 0 => opath(
                fs::CWD,
                format!("/proc/{}/fd/{n}", self.tid).as_bytes(),
                OFlags::empty(),
            )
            .map_err(|e| if e == libc::ENOENT { libc::EBADF } else { e }),
            Dir::Fd(_) => Err(libc::EBADF),
        }
    }

    /// The directory `path` names, from `base`: one `openat2` without magic links, or the slow
    /// way where that reaches `/proc`.
    fn dir(&self, base: &OwnedFd, path: &[u8]) -> Result<OwnedFd, i32> {
        let path: &[u8] = if path.is_empty() { b"." } else { path };
        let how = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        match fs::openat2(base, path, how, Mode::empty(), ResolveFlags::NO_MAGICLINKS) {
            Ok(d) if !is_proc(&d)? => return Ok(d),
            Ok(_) | Err(Errno::LOOP) => {}
            Err(e) => return Err(errno(e)),
        }
        match self.walk(
            base.try_clone()
                .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?,
            path,
        )? {
            Led::Object(d) => Ok(d),
            Led::Missing(_) => Err(libc::ENOENT),
        }
    }

    /// The entry `path` names, looked up from `dir` (the final component is not followed).
    pub(super) fn entry(&self, dir: Dir, path: &[u8]) -> Result<Entry, i32> {
        if path.is_empty() {
            return Err(libc::ENOENT);
        }
        let base = self.start(dir, path)?;
        let trimmed = path
            .iter()
            .rposition(|b| *b != b'/')
            .map_or(&path[..1], |i| &path[..=i]);
        let slash = trimmed.len() < path.len();
        let (head, name) = match trimmed.iter().rposition(|b| *b == b'/') {
            Some(i) => (&trimmed[..=i], &trimmed[i + 1..]),
            None => (&b""[..], trimmed),
        };
        if name.is_empty() || name == b"." || name == b".." {
            // A directory itself (`/`, `a/..`): there is no new name.
            let d = self.dir(&base, trimmed)?;
            return Ok(Entry {
                dir: d,
                name: b".".to_vec(),
                slash: false,
            });
        }
        Ok(Entry {
            dir: self.dir(&base, head)?,
            name: name.to_vec(),
            slash,
        })
    }

    /// The object a metadata call names, opened `O_PATH`: `path` from `dir`, its last symbolic
    /// link followed unless `flags` has `AT_SYMLINK_NOFOLLOW` (a trailing slash follows it all
    /// the same, and wants a directory); an empty path with `AT_EMPTY_PATH` is the directory or
    /// descriptor itself.
    pub(super) fn object(&self, dir: Dir, path: &[u8], flags: i32) -> Result<OwnedFd, i32> {
        if path.is_empty() {
            return match flags & libc::AT_EMPTY_PATH {
                0 => Err(libc::ENOENT),
                _ => self.start(dir, path),
            };
        }
        let e = self.entry(dir, path)?;
        if !e.is_new_name() {
            return Ok(e.dir);
        }
        let slash = e.slash;
        let obj = if flags & libc::AT_SYMLINK_NOFOLLOW != 0 && !slash {
            opath(&e.dir, &e.name, OFlags::NOFOLLOW)?
        } else {
            match self.follow(e)? {
                Led::Object(o) => o,
                Led::Missing(_) => return Err(libc::ENOENT),
            }
        };
        let st = fs::fstat(&obj).map_err(errno)?;
        if slash && fs::FileType::from_raw_mode(st.st_mode) != fs::FileType::Directory {
            return Err(libc::ENOTDIR);
        }
        Ok(obj)
    }

    /// The caller's descriptor `fd`, opened `O_PATH`, for a call made on the descriptor itself
    /// (`fchmod`, `fchown`, `futimens`, `fsetxattr`): `EBADF` where the kernel says so, for a
    /// descriptor that is not open or is an `O_PATH` one (its flags in `/proc/TID/fdinfo/N`).
    pub(super) fn descriptor(&self, fd: i32) -> Result<OwnedFd, i32> {
        if fd < 0 {
            return Err(libc::EBADF);
        }
        let info = fs::open(
            format!("/proc/{}/fdinfo/{fd}", self.tid),
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|_| libc::EBADF)?;
        let mut buf = [0u8; 256];
        let n = rustix::io::read(&info, &mut buf).map_err(errno)?;
        drop(info);
        let flags = String::from_utf8_lossy(&buf[..n])
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            .ok_or(libc::EBADF)?;
        if flags & libc::O_PATH as u32 != 0 {
            return Err(libc::EBADF);
        }
        self.start(Dir::Fd(fd), b"")
    }

    /// Follows `e` through symbolic links (and, in `/proc`, the caller's magic links).
    pub(super) fn follow(&self, e: Entry) -> Result<Led, i32> {
        let name = e.arg();
        self.walk(e.dir, &name)
    }

    /// Whether `d` is in `/proc` (and is its root). A directory of another process than the
    /// caller (PID 1's above all) is refused.
    fn in_proc(&self, d: &OwnedFd) -> Result<(bool, bool), i32> {
        if !is_proc(d)? {
            return Ok((false, false));
        }
        let p = path_of(d)?;
        let mut c = p
            .strip_prefix("/proc")
            .map_err(|_| libc::EACCES)?
            .components();
        match c.next().and_then(|c| c.as_os_str().to_str()) {
            None => Ok((true, true)),
            Some(pid)
                if pid.bytes().all(|b| b.is_ascii_digit()) && pid != self.tgid.to_string() =>
            {
                Err(libc::EACCES)
            }
            Some(_) => Ok((true, false)),
        }
    }

    /// The kernel's lookup, one component at a time from `cur`, following every link.
    fn walk(&self, mut cur: OwnedFd, path: &[u8]) -> Result<Led, i32> {
        let mut todo: VecDeque<Vec<u8>> = parts(path);
        let mut links = 0;
        let (mut proc, mut root) = self.in_proc(&cur)?;
        while let Some(mut c) = todo.pop_front() {
            if proc && root && (c == b"self" || c == b"thread-self") {
                if c == b"thread-self" {
                    todo.push_front(self.tid.to_string().into_bytes());
                    todo.push_front(b"task".to_vec());
                }
                c = self.tgid.to_string().into_bytes();
            }
            let last = todo.is_empty();
            let next = match opath(&cur, &c, OFlags::NOFOLLOW) {
                Err(libc::ENOENT) if last && c != b".." => {
                    return Ok(Led::Missing(Entry {
                        dir: cur,
                        name: c,
                        slash: false,
                    }));
                }
                r => r?,
            };
            let st = fs::fstat(&next).map_err(errno)?;
            if fs::FileType::from_raw_mode(st.st_mode) == fs::FileType::Symlink {
                links += 1;
                if links > MAX_LINKS {
                    return Err(libc::ELOOP);
                }
                if proc && !root {
                    // A magic link of the caller's (`fd/N`, `cwd`, `root`, `exe`): the kernel
                    // follows it to the object itself.
                    cur = opath(&cur, &c, OFlags::empty())?;
                } else {
                    let text = fs::readlinkat(&cur, c.as_slice(), Vec::new()).map_err(errno)?;
                    let text = text.into_bytes();
                    if text.first() == Some(&b'/') {
                        cur = opath(fs::CWD, b"/", OFlags::DIRECTORY)?;
                    }
                    for p in parts(&text).into_iter().rev() {
                        todo.push_front(p);
                    }
                    if todo.is_empty() {
                        continue;
                    }
                }
            } else {
                cur = next;
            }
            (proc, root) = self.in_proc(&cur)?;
        }
        Ok(Led::Object(cur))
    }
}

/// Whether `d` is in a `/proc` file system.
fn is_proc(d: &OwnedFd) -> Result<bool, i32> {
    let st = fs::fstatfs(d).map_err(errno)?;
    // Widened: the field's type differs between architectures and C libraries.
    Ok(st.f_type as u64 == libc::PROC_SUPER_MAGIC as u64)
}

/// The components of a path, without empty ones and `.`.
fn parts(path: &[u8]) -> VecDeque<Vec<u8>> {
    path.split(|b| *b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .map(<[u8]>::to_vec)
        .collect()
}
