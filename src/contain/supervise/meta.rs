//! Each suspended metadata call (`meta_calls.rs`: chmod, chown, utime, extended attributes),
//! performed by PID 1 on what it checked: everything the call points to read once into PID 1's
//! memory (path, times, name, value), the object looked up as the caller would and opened
//! `O_PATH` (`resolve.rs`), refused if it is an inode the plan keeps (`Plan::kept`, by device
//! and inode, whatever path reached it), the call's id checked still valid, and only then the
//! change made on that descriptor, with the caller's values and flags.
use super::{emulate::caller, errno, Answer, Gate, Stop};
use crate::contain::calls::X32_BIT;
use crate::contain::gate::Refusal;
use crate::contain::meta_calls::{Change, Layout, Meta, Target};
use crate::contain::resolve::own;
use crate::sys::notify::Notification;
use rustix::fs::{self, AtFlags, Gid, Mode, Timespec, Timestamps, Uid, XattrFlags, UTIME_NOW};
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

/// The largest attribute value (`XATTR_SIZE_MAX`) and name (`XATTR_NAME_MAX`) the kernel takes.
const XATTR_SIZE_MAX: u64 = 65536;
const XATTR_NAME_MAX: usize = 255;
/// The smallest `struct xattr_args` (`XATTR_ARGS_SIZE_VER0`), and the largest size taken for it.
const XATTR_ARGS_MIN: u64 = 16;
const XATTR_ARGS_MAX: u64 = 4096;

/// A change with everything it points to in PID 1's memory.
enum Act {
    Mode(Mode),
    Owner(Option<Uid>, Option<Gid>),
    Times(Timestamps),
    SetXattr {
        name: Vec<u8>,
        value: Vec<u8>,
        flags: XattrFlags,
    },
    RemoveXattr(Vec<u8>),
}

impl Act {
    /// Makes the change on `obj` (an `O_PATH` descriptor): through `/proc/self/fd/N` where the
    /// call takes a path (which lands on the object itself, a symbolic link included, and is
    /// not followed further), with `AT_EMPTY_PATH` where it takes a descriptor and a path.
    fn on(&self, obj: &OwnedFd) -> rustix::io::Result<()> {
        match self {
            Act::Mode(mode) => fs::chmod(own(obj), *mode),
            Act::Owner(uid, gid) => fs::chownat(obj, "", *uid, *gid, AtFlags::EMPTY_PATH),
            Act::Times(t) => fs::utimensat(obj, "", t, AtFlags::EMPTY_PATH),
            Act::SetXattr { name, value, flags } => {
                fs::setxattr(own(obj), name.as_slice(), value, *flags)
            }
            Act::RemoveXattr(name) => fs::removexattr(own(obj), name.as_slice()),
        }
    }
}

/// A `u64` (or `i64`) of the caller's structure at byte `at`, as the kernel reads it.
fn word(b: &[u8], at: usize) -> i64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    i64::from_ne_bytes(w)
}

/// `(access, modification)` from the caller's times in `layout`, as the kernel converts them.
/// `x32`: a `timespec`'s nanoseconds are its low 32 bits (the kernel masks a compat caller's).
fn timestamps(b: &[u8], layout: Layout, x32: bool) -> Result<Timestamps, Stop> {
    let ts = |tv_sec, tv_nsec| Timespec { tv_sec, tv_nsec };
    let pair = match layout {
        Layout::Utimbuf => (ts(word(b, 0), 0), ts(word(b, 8), 0)),
        Layout::Timevals => {
            let usec = |u: i64| {
                if (0..1_000_000).contains(&u) {
                    Ok(u * 1000)
                } else {
                    Err(Stop::Errno(libc::EINVAL))
                }
            };
            (
                ts(word(b, 0), usec(word(b, 8))?),
                ts(word(b, 16), usec(word(b, 24))?),
            )
        }
        Layout::Timespecs => {
            let nsec = |n: i64| if x32 { n & 0xFFFF_FFFF } else { n };
            (
                ts(word(b, 0), nsec(word(b, 8))),
                ts(word(b, 16), nsec(word(b, 24))),
            )
        }
    };
    Ok(Timestamps {
        last_access: pair.0,
        last_modification: pair.1,
    })
}

/// The size of the caller's times in `layout`.
fn times_size(layout: Layout) -> usize {
    match layout {
        Layout::Utimbuf => 16,
        Layout::Timevals | Layout::Timespecs => 32,
    }
}

/// The device and inode of each path the plan keeps (`Plan::kept`), as the view shows it: a
/// metadata call is judged by the object it reaches, whatever path it took there.
/// Where two paths reach one inode (a worktree's `.git/worktrees/w/../..` is the `.git`), the
/// one that names it plainly is said.
pub(in crate::contain) fn kept_inodes(paths: &[PathBuf]) -> HashMap<(u64, u64), PathBuf> {
    let plain = |p: &PathBuf| {
        let dots = p.components().any(|c| c == std::path::Component::ParentDir);
        (dots, p.components().count())
    };
    let mut kept: HashMap<(u64, u64), PathBuf> = HashMap::new();
    for p in paths {
        let Ok(st) = fs::stat(p) else { continue };
        let have = kept
            .entry((st.st_dev, st.st_ino))
            .or_insert_with(|| p.clone());
        if plain(p) < plain(have) {
            *have = p.clone();
        }
    }
    kept
}

impl Gate {
    /// Performs metadata call `m` for `n`'s caller, or says why not.
    pub(super) fn change(&mut self, n: &Notification, m: Meta) -> Result<Answer, Stop> {
        let (c, _) = caller(n.pid)?;
        // The path first, as the kernel reads it; then what the change points to.
        let path = match m.target {
            Target::Path { at, flags } if at.path == 0 && flags & libc::AT_EMPTY_PATH != 0 => {
                Vec::new()
            }
            Target::Path { at, .. } => self.read(n, at.path)?,
            Target::Fd(_) => Vec::new(),
        };
        let act = self.act(n, m.change)?;
        let obj = match m.target {
            Target::Path { at, flags } => c.object(at.dir, &path, flags)?,
            Target::Fd(fd) => c.descriptor(fd)?,
        };
        let st = fs::fstat(&obj).map_err(errno)?;
        if let Some(kept) = self.kept.get(&(st.st_dev, st.st_ino)) {
            if !crate::mutation::off("metadata_gate") {
                return Err(Stop::Refused(Refusal::Metadata {
                    path: kept.clone(),
                    what: m.change.what(),
                }));
            }
        }
        self.valid(n)?;
        act.on(&obj).map_err(errno)?;
        Ok(Answer::Value(0))
    }

    /// Reads what `change` points to, checked as the kernel checks it before it looks at a file.
    fn act(&self, n: &Notification, change: Change) -> Result<Act, Stop> {
        Ok(match change {
            Change::Mode(mode) => Act::Mode(Mode::from_bits_truncate(mode & 0o7777)),
            Change::Owner { uid, gid } => Act::Owner(
                (uid != u32::MAX).then(|| Uid::from_raw_unchecked(uid)),
                (gid != u32::MAX).then(|| Gid::from_raw_unchecked(gid)),
            ),
            Change::Times { addr: 0, .. } => Act::Times(Timestamps {
                last_access: Timespec {
                    tv_sec: 0,
                    tv_nsec: UTIME_NOW,
                },
                last_modification: Timespec {
                    tv_sec: 0,
                    tv_nsec: UTIME_NOW,
                },
            }),
            Change::Times { addr, layout } => {
                let b = self.read_bytes(n, addr, times_size(layout))?;
                let x32 = n.nr as u32 & X32_BIT != 0;
                Act::Times(timestamps(&b, layout, x32)?)
            }
            Change::SetXattr {
                name,
                value,
                size,
                flags,
            } => self.set_xattr(n, name, value, size, flags)?,
            Change::SetXattrArgs { name, args, size } => {
                if size < XATTR_ARGS_MIN {
                    return Err(Stop::Errno(libc::EINVAL));
                }
                if size > XATTR_ARGS_MAX {
                    return Err(Stop::Errno(libc::E2BIG));
                }
                // A larger structure than the kernel knows is taken if the rest is zero.
                let b = self.read_bytes(n, args, size as usize)?;
                if b[16..].iter().any(|x| *x != 0) {
                    return Err(Stop::Errno(libc::E2BIG));
                }
                // struct xattr_args { u64 value; u32 size; u32 flags; }
                let half = |at: usize| u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
                let (value, len, flags) = (word(&b, 0) as u64, half(8), half(12));
                self.set_xattr(n, name, value, u64::from(len), flags)?
            }
            Change::RemoveXattr { name } => Act::RemoveXattr(self.xattr_name(n, name)?),
        })
    }

    fn set_xattr(
        &self,
        n: &Notification,
        name: u64,
        value: u64,
        size: u64,
        flags: u32,
    ) -> Result<Act, Stop> {
        let flags = XattrFlags::from_bits(flags).ok_or(Stop::Errno(libc::EINVAL))?;
        let name = self.xattr_name(n, name)?;
        if size > XATTR_SIZE_MAX {
            return Err(Stop::Errno(libc::E2BIG));
        }
        let value = self.read_bytes(n, value, size as usize)?;
        Ok(Act::SetXattr { name, value, flags })
    }

    /// An attribute's name: `ERANGE` when empty or longer than the kernel takes.
    fn xattr_name(&self, n: &Notification, addr: u64) -> Result<Vec<u8>, Stop> {
        match self.read(n, addr) {
            Ok(name) if !name.is_empty() && name.len() <= XATTR_NAME_MAX => Ok(name),
            Ok(_) | Err(Stop::Errno(libc::ENAMETOOLONG)) => Err(Stop::Errno(libc::ERANGE)),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(words: &[i64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    fn pair(t: &Timestamps) -> [(i64, i64); 2] {
        let s = |t: &Timespec| (t.tv_sec, t.tv_nsec);
        [s(&t.last_access), s(&t.last_modification)]
    }

    #[test]
    fn the_callers_times_are_converted_as_the_kernel_converts_them() {
        let t = timestamps(&bytes(&[5, 7]), Layout::Utimbuf, false)
            .ok()
            .unwrap();
        assert_eq!(pair(&t), [(5, 0), (7, 0)]);
        let t = timestamps(&bytes(&[5, 3, 7, 999_999]), Layout::Timevals, false)
            .ok()
            .unwrap();
        assert_eq!(pair(&t), [(5, 3000), (7, 999_999_000)]);
        for usec in [-1, 1_000_000] {
            let r = timestamps(&bytes(&[5, usec, 7, 0]), Layout::Timevals, false);
            assert!(matches!(r, Err(Stop::Errno(libc::EINVAL))), "{usec}");
        }
        // UTIME_NOW and UTIME_OMIT go to the kernel as they came; an x32 caller's nanoseconds
        // are the low half of their field.
        let now = UTIME_NOW;
        let t = timestamps(&bytes(&[0, now, 9, 1 << 32 | 4]), Layout::Timespecs, true)
            .ok()
            .unwrap();
        assert_eq!(pair(&t), [(0, now), (9, 4)]);
        let t = timestamps(&bytes(&[0, now, 9, 4]), Layout::Timespecs, false)
            .ok()
            .unwrap();
        assert_eq!(pair(&t), [(0, now), (9, 4)]);
        assert_eq!(times_size(Layout::Utimbuf), 16);
        assert_eq!(times_size(Layout::Timespecs), 32);
    }
}
