//! Each form of each metadata call, decoded to what it asks.
use super::*;
use libc::*;

const CWD: u64 = AT_FDCWD as u32 as u64;

fn fd(n: i32) -> u64 {
    n as u32 as u64
}

fn at(dir: Dir, path: u64, flags: i32) -> Target {
    Target::Path {
        at: At { dir, path },
        flags,
    }
}

fn ok(target: Target, change: Change) -> Option<Result<Meta, i32>> {
    Some(Ok(Meta { target, change }))
}

#[test]
fn each_chmod_decodes_to_its_target_and_mode() {
    let mode = Change::Mode(0o755);
    assert_eq!(
        decode(SYS_chmod as i32, &[0x10, 0o755, 0, 0, 0, 0]),
        ok(at(Dir::Cwd, 0x10, 0), mode)
    );
    assert_eq!(
        decode(SYS_fchmod as i32, &[fd(3), 0o755, 0, 0, 0, 0]),
        ok(Target::Fd(3), mode)
    );
    assert_eq!(
        decode(SYS_fchmodat as i32, &[fd(4), 0x10, 0o755, 0, 0, 0]),
        ok(at(Dir::Fd(4), 0x10, 0), mode)
    );
    let nofollow = AT_SYMLINK_NOFOLLOW as u64;
    assert_eq!(
        decode(SYS_FCHMODAT2 as i32, &[CWD, 0x10, 0o755, nofollow, 0, 0]),
        ok(at(Dir::Cwd, 0x10, AT_SYMLINK_NOFOLLOW), mode)
    );
    let empty = AT_EMPTY_PATH as u64;
    assert_eq!(
        decode(SYS_FCHMODAT2 as i32, &[fd(5), 0x10, 0o755, empty, 0, 0]),
        ok(at(Dir::Fd(5), 0x10, AT_EMPTY_PATH), mode)
    );
    // A flag the kernel does not take there is its EINVAL.
    assert_eq!(
        decode(SYS_FCHMODAT2 as i32, &[CWD, 0x10, 0o755, 0x8000, 0, 0]),
        Some(Err(EINVAL))
    );
}

#[test]
fn each_chown_decodes_to_its_target_and_owner() {
    let owner = Change::Owner {
        uid: 1000,
        gid: u32::MAX,
    };
    let ids = |a: u64, b: u64, c: u64, d: u64| [a, b, c, d, 0, 0];
    let unchanged = u32::MAX as u64;
    assert_eq!(
        decode(SYS_chown as i32, &ids(0x10, 1000, unchanged, 0)),
        ok(at(Dir::Cwd, 0x10, 0), owner)
    );
    assert_eq!(
        decode(SYS_lchown as i32, &ids(0x10, 1000, unchanged, 0)),
        ok(at(Dir::Cwd, 0x10, AT_SYMLINK_NOFOLLOW), owner)
    );
    assert_eq!(
        decode(SYS_fchown as i32, &ids(fd(6), 1000, unchanged, 0)),
        ok(Target::Fd(6), owner)
    );
    let flags = (AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) as u64;
    assert_eq!(
        decode(
            SYS_fchownat as i32,
            &[fd(7), 0x10, 1000, unchanged, flags, 0]
        ),
        ok(
            at(Dir::Fd(7), 0x10, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW),
            owner
        )
    );
    assert_eq!(
        decode(
            SYS_fchownat as i32,
            &[CWD, 0x10, 1000, unchanged, AT_REMOVEDIR as u64, 0]
        ),
        Some(Err(EINVAL))
    );
}

#[test]
fn each_utime_decodes_to_its_target_and_the_layout_of_its_times() {
    let times = |addr, layout| Change::Times { addr, layout };
    assert_eq!(
        decode(SYS_utime as i32, &[0x10, 0x20, 0, 0, 0, 0]),
        ok(at(Dir::Cwd, 0x10, 0), times(0x20, Layout::Utimbuf))
    );
    assert_eq!(
        decode(SYS_utimes as i32, &[0x10, 0, 0, 0, 0, 0]),
        ok(at(Dir::Cwd, 0x10, 0), times(0, Layout::Timevals))
    );
    assert_eq!(
        decode(SYS_futimesat as i32, &[fd(3), 0x10, 0x20, 0, 0, 0]),
        ok(at(Dir::Fd(3), 0x10, 0), times(0x20, Layout::Timevals))
    );
    // A null path: the descriptor itself (from AT_FDCWD, the kernel's EFAULT, when read).
    assert_eq!(
        decode(SYS_futimesat as i32, &[fd(3), 0, 0x20, 0, 0, 0]),
        ok(Target::Fd(3), times(0x20, Layout::Timevals))
    );
    let nofollow = AT_SYMLINK_NOFOLLOW as u64;
    assert_eq!(
        decode(SYS_utimensat as i32, &[CWD, 0x10, 0x20, nofollow, 0, 0]),
        ok(
            at(Dir::Cwd, 0x10, AT_SYMLINK_NOFOLLOW),
            times(0x20, Layout::Timespecs)
        )
    );
    // futimens(fd, times) is utimensat(fd, NULL, times, 0); with a flag, EINVAL.
    assert_eq!(
        decode(SYS_utimensat as i32, &[fd(8), 0, 0x20, 0, 0, 0]),
        ok(Target::Fd(8), times(0x20, Layout::Timespecs))
    );
    assert_eq!(
        decode(SYS_utimensat as i32, &[fd(8), 0, 0x20, nofollow, 0, 0]),
        Some(Err(EINVAL))
    );
    assert_eq!(
        decode(SYS_utimensat as i32, &[CWD, 0, 0, 0, 0, 0]),
        ok(at(Dir::Cwd, 0, 0), times(0, Layout::Timespecs))
    );
    assert_eq!(
        decode(SYS_utimensat as i32, &[CWD, 0x10, 0, 0x4000, 0, 0]),
        Some(Err(EINVAL))
    );
}

#[test]
fn each_extended_attribute_call_decodes_to_its_target_name_and_value() {
    let set = Change::SetXattr {
        name: 0x20,
        value: 0x30,
        size: 44,
        flags: XATTR_CREATE as u32,
    };
    let args = [0x10, 0x20, 0x30, 44, XATTR_CREATE as u64, 0];
    assert_eq!(
        decode(SYS_setxattr as i32, &args),
        ok(at(Dir::Cwd, 0x10, 0), set)
    );
    assert_eq!(
        decode(SYS_lsetxattr as i32, &args),
        ok(at(Dir::Cwd, 0x10, AT_SYMLINK_NOFOLLOW), set)
    );
    let mut by_fd = args;
    by_fd[0] = fd(9);
    assert_eq!(decode(SYS_fsetxattr as i32, &by_fd), ok(Target::Fd(9), set));
    let remove = Change::RemoveXattr { name: 0x20 };
    assert_eq!(
        decode(SYS_removexattr as i32, &[0x10, 0x20, 0, 0, 0, 0]),
        ok(at(Dir::Cwd, 0x10, 0), remove)
    );
    assert_eq!(
        decode(SYS_lremovexattr as i32, &[0x10, 0x20, 0, 0, 0, 0]),
        ok(at(Dir::Cwd, 0x10, AT_SYMLINK_NOFOLLOW), remove)
    );
    assert_eq!(
        decode(SYS_fremovexattr as i32, &[fd(9), 0x20, 0, 0, 0, 0]),
        ok(Target::Fd(9), remove)
    );
    let empty = AT_EMPTY_PATH as u64;
    assert_eq!(
        decode(SYS_SETXATTRAT as i32, &[fd(4), 0x10, empty, 0x20, 0x40, 16]),
        ok(
            at(Dir::Fd(4), 0x10, AT_EMPTY_PATH),
            Change::SetXattrArgs {
                name: 0x20,
                args: 0x40,
                size: 16
            }
        )
    );
    assert_eq!(
        decode(SYS_REMOVEXATTRAT as i32, &[CWD, 0x10, 0, 0x20, 0, 0]),
        ok(at(Dir::Cwd, 0x10, 0), remove)
    );
    assert_eq!(
        decode(SYS_REMOVEXATTRAT as i32, &[CWD, 0x10, 1, 0x20, 0, 0]),
        Some(Err(EINVAL))
    );
}

#[test]
fn x32_forms_decode_as_the_64_bit_ones_and_other_calls_not_at_all() {
    for nr in numbers() {
        let a = [0x10, 0x20, 0x30, 0, 0, 0];
        assert!(decode(nr as i32, &a).is_some(), "{nr}");
        assert_eq!(
            decode((nr as u32 | X32_BIT) as i32, &a),
            decode(nr as i32, &a)
        );
    }
    for nr in [SYS_getxattr, SYS_listxattr, SYS_stat, SYS_openat, SYS_mkdir] {
        assert_eq!(decode(nr as i32, &[0; 6]), None, "{nr}");
    }
    assert_eq!(numbers().len(), 20);
}

#[test]
fn a_refusal_names_what_would_have_changed() {
    assert_eq!(Change::Mode(0).what(), "the mode");
    assert_eq!(Change::Owner { uid: 0, gid: 0 }.what(), "the owner");
    let t = Change::Times {
        addr: 0,
        layout: Layout::Utimbuf,
    };
    assert_eq!(t.what(), "the times");
    assert!(Change::RemoveXattr { name: 0 }.what().contains("ACL"));
}
