//! The client's seccomp filter for the creation gate: it suspends every call that can make a
//! name (`open`/`openat`/`creat` with `O_CREAT` or `O_TMPFILE`, `mkdir`, `mknod`, `link`,
//! `symlink`, `rename` and their `…at` forms; `calls.rs` decodes them) and every call that
//! changes a file's metadata (chmod, chown, utime, extended attributes; `meta_calls.rs`). The
//! filter is a few lines of classic BPF written here rather than compiled by
//! `seccompiler`, which has no user-notification action: an architecture check, a list of
//! numbers, and for the opens a masked test of the flags, so an open that creates nothing never
//! reaches the supervisor. `openat2` fails with `ENOSYS` (its flags are in memory the filter
//! cannot read; libc then falls back to `openat`).
use super::calls::X32_BIT;
use super::meta_calls;
use crate::sys::notify::Insn;

/// The architectures the gate is built for; elsewhere `vault run` says so and starts nothing.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

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
    // Every call that changes a file's mode, owner, times or extended attributes (the metadata
    // gate: `meta_calls.rs`).
    t.extend(
        meta_calls::numbers()
            .into_iter()
            .map(|nr| (nr, Rule::Notify)),
    );
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

/// Whether a kernel of `release` (`uname -r`) can run the gate: `ADDFD` with `SEND` (the
/// descriptor an emulated open hands over as the call's return value) came in Linux 5.14.
pub(super) fn kernel_supports(release: &str) -> Result<(), String> {
    let mut v = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
    if (major, minor) >= (5, 14) {
        Ok(())
    } else {
        Err(format!(
            "this kernel ({}) is older than Linux 5.14, whose seccomp hands a descriptor over as a call's answer (ADDFD with SEND); the creation gate, which keeps a repository from being planted in your directories, cannot run. Run a kernel of 5.14 or later",
            release.trim()
        ))
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::contain::calls::decode;
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

    /// Every form of chmod, chown, utime and setting or removing an extended attribute.
    const METADATA: &[c_long] = &[
        SYS_chmod,
        SYS_fchmod,
        SYS_fchmodat,
        452, // fchmodat2
        SYS_chown,
        SYS_fchown,
        SYS_lchown,
        SYS_fchownat,
        SYS_utime,
        SYS_utimes,
        SYS_futimesat,
        SYS_utimensat,
        SYS_setxattr,
        SYS_lsetxattr,
        SYS_fsetxattr,
        SYS_removexattr,
        SYS_lremovexattr,
        SYS_fremovexattr,
        463, // setxattrat
        466, // removexattrat
    ];

    #[test]
    fn every_call_that_changes_metadata_is_suspended_and_decoded_and_no_read_of_it() {
        let p = program().unwrap();
        for &nr in METADATA {
            assert_eq!(verdict(nr, [0; 6]), NOTIFY, "{nr}");
            let x32 = nr as u32 | X32_BIT;
            assert_eq!(run(&p, AUDIT_ARCH, x32, [0; 6]), NOTIFY, "x32 {nr}");
            assert!(
                crate::contain::meta_calls::decode(nr as i32, &[0; 6]).is_some(),
                "{nr} is suspended but not decoded"
            );
            assert_eq!(decode(nr as i32, &[0; 6]), None, "{nr} is not a creation");
        }
        for nr in [
            SYS_stat,
            SYS_lstat,
            SYS_newfstatat,
            SYS_statx,
            SYS_access,
            SYS_faccessat,
            SYS_getxattr,
            SYS_lgetxattr,
            SYS_fgetxattr,
            SYS_listxattr,
            SYS_llistxattr,
            SYS_flistxattr,
            464, // getxattrat
            465, // listxattrat
        ] {
            assert_eq!(verdict(nr, [0; 6]), ALLOW, "{nr}");
            assert!(crate::contain::meta_calls::decode(nr as i32, &[0; 6]).is_none());
        }
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
    fn the_gate_needs_linux_5_14() {
        assert!(kernel_supports("6.18.44-fc-v1272").is_ok());
        assert!(kernel_supports("5.14.0-70.el9.x86_64").is_ok());
        let e = kernel_supports("5.10.0-28-amd64\n").unwrap_err();
        assert!(
            e.contains("(5.10.0-28-amd64)") && e.contains("5.14 or later"),
            "{e}"
        );
        assert!(kernel_supports("4.19.0").is_err());
        assert!(kernel_supports("").is_err());
    }
}
