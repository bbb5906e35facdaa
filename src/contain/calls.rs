//! The calls the creation gate suspends (every call that can make a name: `open`/`openat`/
//! `creat` with `O_CREAT` or `O_TMPFILE`, `mkdir`, `mknod`, `link`, `symlink`, `rename` and
//! their `…at` forms) as the client's seccomp filter, and each suspended call decoded into what
//! it asks. The filter is a few lines of classic BPF written here rather than compiled by
//! `seccompiler`, which has no user-notification action: an architecture check, a list of
//! numbers, and for the opens a masked test of the flags, so an open that creates nothing never
//! reaches the supervisor. `openat2` fails with `ENOSYS` (its flags are in memory the filter
//! cannot read; libc then falls back to `openat`).
use crate::sys::notify::Insn;

/// The architectures the gate is built for; elsewhere `vault run` says so and starts nothing.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
/// x86_64's x32 calls: the same numbers with this bit. Masked off, they are judged as the 64-bit
/// calls they are (same registers, same flags).
#[cfg(target_arch = "x86_64")]
pub(super) const X32_BIT: u32 = 0x4000_0000;
#[cfg(not(target_arch = "x86_64"))]
pub(super) const X32_BIT: u32 = 0;

/// What the filter does with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    Notify,
    /// Notify only when argument `arg` (the open flags) has `O_CREAT` or `O_TMPFILE`.
    NotifyIfCreating {
        arg: u32,
    },
    Fail(i32),
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn table() -> Vec<(libc::c_long, Rule)> {
    use libc::*;
    let mut t = vec![
        (SYS_openat, Rule::NotifyIfCreating { arg: 2 }),
        (SYS_mkdirat, Rule::Notify),
        (SYS_mknodat, Rule::Notify),
        (SYS_linkat, Rule::Notify),
        (SYS_symlinkat, Rule::Notify),
        (SYS_renameat, Rule::Notify),
        (SYS_renameat2, Rule::Notify),
        (SYS_openat2, Rule::Fail(ENOSYS)),
    ];
    #[cfg(target_arch = "x86_64")]
    t.extend([
        (SYS_open, Rule::NotifyIfCreating { arg: 1 }),
        (SYS_creat, Rule::Notify),
        (SYS_mkdir, Rule::Notify),
        (SYS_mknod, Rule::Notify),
        (SYS_link, Rule::Notify),
        (SYS_symlink, Rule::Notify),
        (SYS_rename, Rule::Notify),
    ]);
    t
}

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JSET_K: u16 = 0x45;
const AND_K: u16 = 0x54;
const RET_K: u16 = 0x06;

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> Insn {
    Insn { code, jt, jf, k }
}

/// The flags that make an open create: `O_CREAT`, and `O_TMPFILE` (less its `O_DIRECTORY`).
pub(super) const CREATING: i32 = libc::O_CREAT | (libc::O_TMPFILE & !libc::O_DIRECTORY);

/// The client's filter, or why this machine has none.
#[cfg(all(
    any(target_arch = "x86_64", target_arch = "aarch64"),
    target_endian = "little"
))]
pub(super) fn program() -> Result<Vec<Insn>, String> {
    let notify = insn(RET_K, 0, 0, libc::SECCOMP_RET_USER_NOTIF);
    let allow = insn(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW);
    let mut p = vec![
        insn(LD_W_ABS, 0, 0, 4), // arch
        insn(JEQ_K, 1, 0, AUDIT_ARCH),
        insn(RET_K, 0, 0, libc::SECCOMP_RET_KILL_PROCESS),
        insn(LD_W_ABS, 0, 0, 0), // nr
        insn(AND_K, 0, 0, !X32_BIT),
    ];
    for (nr, rule) in table() {
        let block = match rule {
            Rule::Notify => vec![notify],
            Rule::Fail(e) => vec![insn(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | e as u32)],
            // The low half of the argument (an int, little-endian), tested against the mask.
            Rule::NotifyIfCreating { arg } => vec![
                insn(LD_W_ABS, 0, 0, 16 + 8 * arg),
                insn(JSET_K, 0, 1, CREATING as u32),
                notify,
                allow,
            ],
        };
        p.push(insn(JEQ_K, 0, block.len() as u8, nr as u32));
        p.extend(block);
    }
    p.push(allow);
    Ok(p)
}

#[cfg(not(all(
    any(target_arch = "x86_64", target_arch = "aarch64"),
    target_endian = "little"
)))]
pub(super) fn program() -> Result<Vec<Insn>, String> {
    Err(format!(
        "the creation gate is built for x86_64 and aarch64 only, not {}",
        std::env::consts::ARCH
    ))
}

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

fn dir(arg: u64) -> Dir {
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

    /// Runs a classic BPF program the way the kernel runs a seccomp filter, on a call `nr` with
    /// arguments `args` of architecture `arch`.
    fn run(p: &[Insn], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let mut data = Vec::new();
        data.extend(nr.to_le_bytes());
        data.extend(arch.to_le_bytes());
        data.extend(0u64.to_le_bytes());
        for a in args {
            data.extend(a.to_le_bytes());
        }
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let i = p[pc];
            pc += 1;
            match i.code {
                LD_W_ABS => {
                    let o = i.k as usize;
                    a = u32::from_le_bytes(data[o..o + 4].try_into().unwrap());
                }
                AND_K => a &= i.k,
                JEQ_K | JSET_K => {
                    let hit = if i.code == JEQ_K {
                        a == i.k
                    } else {
                        a & i.k != 0
                    };
                    pc += usize::from(if hit { i.jt } else { i.jf });
                }
                RET_K => return i.k,
                c => panic!("instruction {c:#x} is not expected"),
            }
        }
    }

    const NOTIFY: u32 = SECCOMP_RET_USER_NOTIF;
    const ALLOW: u32 = SECCOMP_RET_ALLOW;

    fn verdict(nr: c_long, args: [u64; 6]) -> u32 {
        run(&program().unwrap(), AUDIT_ARCH, nr as u32, args)
    }

    #[test]
    fn only_the_calls_that_make_a_name_are_suspended() {
        let creat = (O_WRONLY | O_CREAT | O_TRUNC) as u64;
        assert_eq!(verdict(SYS_openat, [0, 0, creat, 0o644, 0, 0]), NOTIFY);
        assert_eq!(
            verdict(SYS_openat, [0, 0, O_TMPFILE as u64 | 2, 0, 0, 0]),
            NOTIFY
        );
        assert_eq!(verdict(SYS_open, [0, creat, 0o644, 0, 0, 0]), NOTIFY);
        // An open that creates nothing runs as it is, whatever the upper half holds.
        let plain = (O_RDONLY | O_CLOEXEC) as u64 | 0xffff_ffff_0000_0000;
        assert_eq!(verdict(SYS_openat, [0, 0, plain, 0, 0, 0]), ALLOW);
        assert_eq!(verdict(SYS_open, [0, O_RDWR as u64, 0, 0, 0, 0]), ALLOW);
        assert_eq!(
            verdict(SYS_openat, [0, 0, O_DIRECTORY as u64, 0, 0, 0]),
            ALLOW
        );
        for nr in [
            SYS_creat,
            SYS_mkdir,
            SYS_mkdirat,
            SYS_mknod,
            SYS_mknodat,
            SYS_link,
            SYS_linkat,
            SYS_symlink,
            SYS_symlinkat,
            SYS_rename,
            SYS_renameat,
            SYS_renameat2,
        ] {
            assert_eq!(verdict(nr, [0; 6]), NOTIFY, "{nr}");
            assert!(
                decode(nr as i32, &[0; 6]).is_some(),
                "{nr} is suspended but not decoded"
            );
        }
        for nr in [
            SYS_read, SYS_write, SYS_close, SYS_getpid, SYS_unlink, SYS_execve, SYS_fstat,
        ] {
            assert_eq!(verdict(nr, [0; 6]), ALLOW, "{nr}");
            assert_eq!(decode(nr as i32, &[0; 6]), None, "{nr}");
        }
        assert_eq!(
            verdict(SYS_openat2, [0; 6]),
            SECCOMP_RET_ERRNO | ENOSYS as u32
        );
    }

    #[test]
    fn x32_calls_are_judged_as_the_64_bit_ones_and_another_architecture_is_killed() {
        let p = program().unwrap();
        let x32 = |nr: c_long| nr as u32 | X32_BIT;
        assert_eq!(run(&p, AUDIT_ARCH, x32(SYS_mkdir), [0; 6]), NOTIFY);
        let creat = O_CREAT as u64;
        assert_eq!(
            run(&p, AUDIT_ARCH, x32(SYS_openat), [0, 0, creat, 0, 0, 0]),
            NOTIFY
        );
        assert_eq!(run(&p, AUDIT_ARCH, x32(SYS_read), [0; 6]), ALLOW);
        assert_eq!(
            decode(x32(SYS_mkdir) as i32, &[1, 0o755, 0, 0, 0, 0]),
            decode(SYS_mkdir as i32, &[1, 0o755, 0, 0, 0, 0])
        );
        // i386 (int 0x80): its mkdir is 39.
        assert_eq!(run(&p, 0x4000_0003, 39, [0; 6]), SECCOMP_RET_KILL_PROCESS);
    }

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
