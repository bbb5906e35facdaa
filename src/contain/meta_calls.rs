//! What a metadata call the gate suspended (`filter.rs`) asks, whatever form it came in: chmod,
//! chown, utime and setting or removing an extended attribute (a POSIX ACL is one), by path from
//! the working directory or a descriptor (with the call's `AT_SYMLINK_NOFOLLOW` and
//! `AT_EMPTY_PATH`; the `l…` forms are `AT_SYMLINK_NOFOLLOW`), or on a descriptor itself
//! (`fchmod`, `fchown`, `futimens`, `fsetxattr`, `fremovexattr`). Reading calls (`stat`,
//! `getxattr`, `listxattr`) are never suspended.
use super::calls::{dir, At, Dir, X32_BIT};
use libc::c_long;

/// Numbers libc does not name on every architecture (the same on all of them since 4.20's
/// common table).
pub(super) const SYS_FCHMODAT2: c_long = 452;
pub(super) const SYS_SETXATTRAT: c_long = 463;
pub(super) const SYS_REMOVEXATTRAT: c_long = 466;

/// The `AT_` flags a metadata call takes; any other is `EINVAL`, as the kernel says.
const TAKEN_FLAGS: i32 = libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH;

/// What a metadata call changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    /// A path (an address in the caller's memory) from a directory, with the call's `AT_` flags.
    Path { at: At, flags: i32 },
    /// One of the caller's descriptors.
    Fd(i32),
}

/// How new times lie in the caller's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Layout {
    /// `struct utimbuf`: access and modification seconds (`utime`).
    Utimbuf,
    /// Two `struct timeval`s (`utimes`, `futimesat`).
    Timevals,
    /// Two `struct timespec`s, `UTIME_NOW` and `UTIME_OMIT` among them (`utimensat`).
    Timespecs,
}

/// The change a metadata call asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Change {
    Mode(u32),
    /// New owner and group (`u32::MAX`: left as it is).
    Owner {
        uid: u32,
        gid: u32,
    },
    /// New times at `addr` (0: now).
    Times {
        addr: u64,
        layout: Layout,
    },
    /// Attribute `name` set to `size` bytes at `value`, with `XATTR_CREATE` or `XATTR_REPLACE`.
    SetXattr {
        name: u64,
        value: u64,
        size: u64,
        flags: u32,
    },
    /// As `SetXattr`, with value, size and flags in a `struct xattr_args` of `size` bytes at
    /// `args` (`setxattrat`).
    SetXattrArgs {
        name: u64,
        args: u64,
        size: u64,
    },
    RemoveXattr {
        name: u64,
    },
}

impl Change {
    /// How the change is named in a refusal: "refused changing {what} of PATH".
    pub(super) fn what(&self) -> &'static str {
        match self {
            Change::Mode(_) => "the mode",
            Change::Owner { .. } => "the owner",
            Change::Times { .. } => "the times",
            Change::SetXattr { .. } | Change::SetXattrArgs { .. } | Change::RemoveXattr { .. } => {
                "an extended attribute (an ACL is one)"
            }
        }
    }
}

/// A metadata call: what it changes, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Meta {
    pub target: Target,
    pub change: Change,
}

/// The numbers of every metadata call, for the filter (x32's are these with its bit).
pub(super) fn numbers() -> Vec<c_long> {
    use libc::*;
    let mut n = vec![
        SYS_fchmod,
        SYS_fchmodat,
        SYS_FCHMODAT2,
        SYS_fchown,
        SYS_fchownat,
        SYS_utimensat,
        SYS_setxattr,
        SYS_lsetxattr,
        SYS_fsetxattr,
        SYS_removexattr,
        SYS_lremovexattr,
        SYS_fremovexattr,
        SYS_SETXATTRAT,
        SYS_REMOVEXATTRAT,
    ];
    #[cfg(target_arch = "x86_64")]
    n.extend([
        SYS_chmod,
        SYS_chown,
        SYS_lchown,
        SYS_utime,
        SYS_utimes,
        SYS_futimesat,
    ]);
    n
}

/// `path` from `d`, or, where the call allows a null path for it (`utimensat`, `futimesat`),
/// the descriptor `d` itself.
fn path_or_fd(d: u64, path: u64, flags: i32) -> Target {
    match (dir(d), path) {
        (Dir::Fd(fd), 0) => Target::Fd(fd),
        (dir, path) => Target::Path {
            at: At { dir, path },
            flags,
        },
    }
}

/// Decodes call `nr` (x32's bit masked off) with `a`, its arguments: `None` when it changes no
/// metadata, `Err(errno)` when the kernel would refuse its flags as they are.
pub(super) fn decode(nr: i32, a: &[u64; 6]) -> Option<Result<Meta, i32>> {
    use libc::{AT_FDCWD, AT_SYMLINK_NOFOLLOW, EINVAL};
    let path = |d: u64, path: u64, flags: i32| Target::Path {
        at: At { dir: dir(d), path },
        flags,
    };
    let cwd = |p: u64, flags: i32| path(AT_FDCWD as u32 as u64, p, flags);
    let fd = |arg: u64| Target::Fd(arg as i32);
    let owner = |u: u64, g: u64| Change::Owner {
        uid: u as u32,
        gid: g as u32,
    };
    let set = |name, value, size, flags: u64| Change::SetXattr {
        name,
        value,
        size,
        flags: flags as u32,
    };
    let times = |addr, layout| Change::Times { addr, layout };
    let checked = |flags: u64| -> Result<i32, i32> {
        let f = flags as i32;
        if f & !TAKEN_FLAGS != 0 {
            Err(EINVAL)
        } else {
            Ok(f)
        }
    };
    let nr = c_long::from(nr as u32 & !X32_BIT);
    let meta = |target, change| Some(Ok(Meta { target, change }));
    #[cfg(target_arch = "x86_64")]
    match nr {
        libc::SYS_chmod => return meta(cwd(a[0], 0), Change::Mode(a[1] as u32)),
        libc::SYS_chown => return meta(cwd(a[0], 0), owner(a[1], a[2])),
        libc::SYS_lchown => return meta(cwd(a[0], AT_SYMLINK_NOFOLLOW), owner(a[1], a[2])),
        libc::SYS_utime => return meta(cwd(a[0], 0), times(a[1], Layout::Utimbuf)),
        libc::SYS_utimes => return meta(cwd(a[0], 0), times(a[1], Layout::Timevals)),
        libc::SYS_futimesat => {
            return meta(path_or_fd(a[0], a[1], 0), times(a[2], Layout::Timevals));
        }
        _ => {}
    }
    let (target, change) = match nr {
        libc::SYS_fchmod => (fd(a[0]), Change::Mode(a[1] as u32)),
        libc::SYS_fchmodat => (path(a[0], a[1], 0), Change::Mode(a[2] as u32)),
        SYS_FCHMODAT2 => match checked(a[3]) {
            Ok(f) => (path(a[0], a[1], f), Change::Mode(a[2] as u32)),
            Err(e) => return Some(Err(e)),
        },
        libc::SYS_fchown => (fd(a[0]), owner(a[1], a[2])),
        libc::SYS_fchownat => match checked(a[4]) {
            Ok(f) => (path(a[0], a[1], f), owner(a[2], a[3])),
            Err(e) => return Some(Err(e)),
        },
        libc::SYS_utimensat => match (checked(a[3]), path_or_fd(a[0], a[1], a[3] as i32)) {
            (Err(e), _) => return Some(Err(e)),
            // On the descriptor itself (`futimens`), no flag is taken.
            (Ok(f), Target::Fd(_)) if f != 0 => return Some(Err(EINVAL)),
            (Ok(_), target) => (target, times(a[2], Layout::Timespecs)),
        },
        libc::SYS_setxattr => (cwd(a[0], 0), set(a[1], a[2], a[3], a[4])),
        libc::SYS_lsetxattr => (cwd(a[0], AT_SYMLINK_NOFOLLOW), set(a[1], a[2], a[3], a[4])),
        libc::SYS_fsetxattr => (fd(a[0]), set(a[1], a[2], a[3], a[4])),
        libc::SYS_removexattr => (cwd(a[0], 0), Change::RemoveXattr { name: a[1] }),
        libc::SYS_lremovexattr => (
            cwd(a[0], AT_SYMLINK_NOFOLLOW),
            Change::RemoveXattr { name: a[1] },
        ),
        libc::SYS_fremovexattr => (fd(a[0]), Change::RemoveXattr { name: a[1] }),
        SYS_SETXATTRAT => match checked(a[2]) {
            Ok(f) => (
                path(a[0], a[1], f),
                Change::SetXattrArgs {
                    name: a[3],
                    args: a[4],
                    size: a[5],
                },
            ),
            Err(e) => return Some(Err(e)),
        },
        SYS_REMOVEXATTRAT => match checked(a[2]) {
            Ok(f) => (path(a[0], a[1], f), Change::RemoveXattr { name: a[3] }),
            Err(e) => return Some(Err(e)),
        },
        _ => return None,
    };
    meta(target, change)
}

#[cfg(all(test, target_arch = "x86_64"))]
#[path = "meta_calls_tests.rs"]
mod tests;
