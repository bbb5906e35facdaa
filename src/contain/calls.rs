//! What a call the creation gate suspended (`filter.rs`) asks, whatever form it came in:
//! `creat` is an open, `mkdir` a `mkdirat` from the working directory, `rename` a `renameat2`
//! without flags.

/// x86_64's x32 calls: the same numbers with this bit. Masked off, they are judged as the 64-bit
/// calls they are (same registers, same flags).
#[cfg(target_arch = "x86_64")]
pub(super) const X32_BIT: u32 = 0x4000_0000;
#[cfg(not(target_arch = "x86_64"))]
pub(super) const X32_BIT: u32 = 0;

/// Where a path is looked up from: the working directory or a descriptor of the caller's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dir {
    Cwd,
    Fd(i32),
}

/// A path argument: its directory and its address in the caller's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct At {
    pub dir: Dir,
    pub path: u64,
}

/// What a suspended call asks, whatever form it came in (`creat` is an `Open`, `mkdir` a
/// `Mkdir` from the working directory, `rename` a `Rename` without flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Call {
    Open { at: At, flags: i32, mode: u32 },
    Mkdir { at: At, mode: u32 },
    Mknod { at: At, mode: u32, dev: u64 },
    Link { old: At, new: At, flags: i32 },
    Symlink { target: u64, new: At },
    Rename { old: At, new: At, flags: u32 },
}

pub(super) fn dir(arg: u64) -> Dir {
    match arg as i32 {
        libc::AT_FDCWD => Dir::Cwd,
        fd => Dir::Fd(fd),
    }
}

/// Decodes call `nr` (x32's bit masked off) with `a`, its arguments.
pub(super) fn decode(nr: i32, a: &[u64; 6]) -> Option<Call> {
    use libc::{O_CREAT, O_TRUNC, O_WRONLY};
    let cwd = |path| At {
        dir: Dir::Cwd,
        path,
    };
    let at = |d, path| At { dir: dir(d), path };
    let nr = libc::c_long::from(nr as u32 & !X32_BIT);
    #[cfg(target_arch = "x86_64")]
    match nr {
        libc::SYS_open => {
            return Some(Call::Open {
                at: cwd(a[0]),
                flags: a[1] as i32,
                mode: a[2] as u32,
            })
        }
        libc::SYS_creat => {
            return Some(Call::Open {
                at: cwd(a[0]),
                flags: O_CREAT | O_WRONLY | O_TRUNC,
                mode: a[1] as u32,
            })
        }
        libc::SYS_mkdir => {
            return Some(Call::Mkdir {
                at: cwd(a[0]),
                mode: a[1] as u32,
            })
        }
        libc::SYS_mknod => {
            return Some(Call::Mknod {
                at: cwd(a[0]),
                mode: a[1] as u32,
                dev: a[2],
            })
        }
        libc::SYS_link => {
            return Some(Call::Link {
                old: cwd(a[0]),
                new: cwd(a[1]),
                flags: 0,
            })
        }
        libc::SYS_symlink => {
            return Some(Call::Symlink {
                target: a[0],
                new: cwd(a[1]),
            })
        }
        libc::SYS_rename => {
            return Some(Call::Rename {
                old: cwd(a[0]),
                new: cwd(a[1]),
                flags: 0,
            })
        }
        _ => {}
    }
    let _ = cwd;
    Some(match nr {
        libc::SYS_openat => Call::Open {
            at: at(a[0], a[1]),
            flags: a[2] as i32,
            mode: a[3] as u32,
        },
        libc::SYS_mkdirat => Call::Mkdir {
            at: at(a[0], a[1]),
            mode: a[2] as u32,
        },
        libc::SYS_mknodat => Call::Mknod {
            at: at(a[0], a[1]),
            mode: a[2] as u32,
            dev: a[3],
        },
        libc::SYS_linkat => Call::Link {
            old: at(a[0], a[1]),
            new: at(a[2], a[3]),
            flags: a[4] as i32,
        },
        libc::SYS_symlinkat => Call::Symlink {
            target: a[0],
            new: at(a[1], a[2]),
        },
        libc::SYS_renameat => Call::Rename {
            old: at(a[0], a[1]),
            new: at(a[2], a[3]),
            flags: 0,
        },
        libc::SYS_renameat2 => Call::Rename {
            old: at(a[0], a[1]),
            new: at(a[2], a[3]),
            flags: a[4] as u32,
        },
        _ => return None,
    })
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use libc::*;

    #[test]
    fn each_form_of_a_call_decodes_to_what_it_asks() {
        let fd = |n: i32| n as u32 as u64;
        let cwd = AT_FDCWD as u32 as u64;
        let at = |dir, path| At { dir, path };
        assert_eq!(
            decode(SYS_creat as i32, &[0x10, 0o600, 0, 0, 0, 0]),
            Some(Call::Open {
                at: at(Dir::Cwd, 0x10),
                flags: O_CREAT | O_WRONLY | O_TRUNC,
                mode: 0o600
            })
        );
        assert_eq!(
            decode(
                SYS_openat as i32,
                &[fd(7), 0x10, O_CREAT as u64, 0o644, 0, 0]
            ),
            Some(Call::Open {
                at: at(Dir::Fd(7), 0x10),
                flags: O_CREAT,
                mode: 0o644
            })
        );
        assert_eq!(
            decode(SYS_mkdirat as i32, &[cwd, 0x10, 0o755, 0, 0, 0]),
            Some(Call::Mkdir {
                at: at(Dir::Cwd, 0x10),
                mode: 0o755
            })
        );
        assert_eq!(
            decode(
                SYS_mknod as i32,
                &[0x10, (S_IFIFO | 0o644) as u64, 0, 0, 0, 0]
            ),
            Some(Call::Mknod {
                at: at(Dir::Cwd, 0x10),
                mode: S_IFIFO | 0o644,
                dev: 0
            })
        );
        assert_eq!(
            decode(
                SYS_linkat as i32,
                &[fd(3), 0x10, cwd, 0x20, AT_EMPTY_PATH as u64, 0]
            ),
            Some(Call::Link {
                old: at(Dir::Fd(3), 0x10),
                new: at(Dir::Cwd, 0x20),
                flags: AT_EMPTY_PATH
            })
        );
        assert_eq!(
            decode(SYS_symlinkat as i32, &[0x10, fd(4), 0x20, 0, 0, 0]),
            Some(Call::Symlink {
                target: 0x10,
                new: at(Dir::Fd(4), 0x20)
            })
        );
        assert_eq!(
            decode(SYS_rename as i32, &[0x10, 0x20, 0, 0, 0, 0]),
            Some(Call::Rename {
                old: at(Dir::Cwd, 0x10),
                new: at(Dir::Cwd, 0x20),
                flags: 0
            })
        );
        assert_eq!(
            decode(SYS_renameat2 as i32, &[cwd, 0x10, fd(5), 0x20, 2, 0]),
            Some(Call::Rename {
                old: at(Dir::Cwd, 0x10),
                new: at(Dir::Fd(5), 0x20),
                flags: 2
            })
        );
    }
}
