//! The kernel's limits on the client, applied by PID 1 once the view is built and inherited by
//! every process it starts: a Landlock domain (read everywhere, write only where the plan says;
//! no signal and no abstract Unix socket outside the domain, ABI 6 scopes; and, where the kernel
//! has ABI 9, no named Unix socket outside the writable paths), no new privileges, and seccomp
//! filters (compiled by `seccompiler`) that refuse the ioctls that push input into a terminal
//! (`TIOCSTI`, `TIOCLINUX`), so nothing typed from inside reaches the person's shell after the
//! run, and what would go around the creation gate (`supervise.rs`): a new user namespace and
//! io_uring.
use super::plan::Plan;
use landlock::{
    Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Why the limits could not be applied.
#[derive(Debug, thiserror::Error)]
pub(super) enum ConfineError {
    #[error("Landlock: {0}")]
    Landlock(String),
    #[error("seccomp: {0}")]
    Seccomp(String),
}

fn ll(e: impl std::fmt::Display) -> ConfineError {
    ConfineError::Landlock(e.to_string())
}

/// Paths the client writes to besides the plan's: its private temporary directories, the new
/// `devpts`, shared memory, its own `/proc`, and the harmless device nodes.
fn extra_writable() -> Vec<PathBuf> {
    [
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/tty",
        "/dev/pts",
        "/dev/ptmx",
        "/dev/shm",
        "/proc",
    ]
    .iter()
    .map(PathBuf::from)
    .collect()
}

/// Applies the Landlock domain. With `weaker_ok`, a kernel without the ABI 6 scopes (or without
/// Landlock) gets what it has.
pub(super) fn landlock(plan: &Plan, weaker_ok: bool) -> Result<(), ConfineError> {
    let level = if weaker_ok {
        CompatLevel::BestEffort
    } else {
        CompatLevel::HardRequirement
    };
    let base = ABI::V6;
    let mut ruleset = Ruleset::default()
        .set_compatibility(level)
        .handle_access(AccessFs::from_all(base))
        .map_err(ll)?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(ll)?
        // Newer rights (named Unix sockets, ABI 9) where the kernel has them.
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(ABI::V9))
        .map_err(ll)?
        .create()
        .map_err(ll)?;
    let read = AccessFs::from_read(ABI::V9);
    let all = AccessFs::from_all(ABI::V9);
    ruleset = ruleset
        .add_rule(PathBeneath::new(PathFd::new("/").map_err(ll)?, read))
        .map_err(ll)?;
    let writable = plan.writable().cloned().chain(extra_writable());
    for p in writable {
        if !p.exists() {
            continue;
        }
        let access = if p.is_dir() {
            all
        } else {
            all & AccessFs::from_file(ABI::V9)
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(PathFd::new(&p).map_err(ll)?, access))
            .map_err(|e| ll(format!("{}: {e}", p.display())))?;
    }
    // ABI 6 and its scopes are a hard requirement (unless `weaker_ok`): `create` failed above
    // on a kernel without them. What is newer (ABI 9) is taken where the kernel has it.
    let status = ruleset.restrict_self().map_err(ll)?;
    if status.ruleset == RulesetStatus::NotEnforced && !weaker_ok {
        return Err(ll("the kernel enforced none of the rules"));
    }
    Ok(())
}

/// The ioctls that inject input into a terminal.
const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541c;

/// Installs the seccomp filters: `ioctl(_, TIOCSTI | TIOCLINUX, _)` fails with `EPERM` (the
/// request compared as the kernel reads it, 32 bits); so do `clone` and `unshare` with
/// `CLONE_NEWUSER` and `io_uring_setup`; `clone3` fails with `ENOSYS`. Every other call is
/// allowed.
///
/// - A new user namespace would give the client every capability inside it: mounts of its own,
///   and a view where the paths PID 1 reads back (`/proc/self/fd`) no longer name what the
///   creation gate judges. So tools that sandbox themselves that way (bwrap, Chromium's and
///   Firefox's sandboxes, `unshare -r`) do not run inside.
/// - io_uring performs opens, `mkdirat`, `linkat`, `renameat`… from the kernel's own workers,
///   where no seccomp filter sees them: the creation gate would never be asked.
/// - `clone3` passes its flags in memory, which a filter cannot read; `ENOSYS` makes libc fall
///   back to `clone`, whose flags it can.
pub(super) fn seccomp() -> Result<(), ConfineError> {
    if crate::mutation::off("tiocsti") {
        return Ok(());
    }
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };
    let sc = |e: seccompiler::BackendError| ConfineError::Seccomp(e.to_string());
    let cond = |len, op, v: u64| -> Result<SeccompRule, ConfineError> {
        let c = SeccompCondition::new(0, len, op, v).map_err(sc)?;
        SeccompRule::new(vec![c]).map_err(sc)
    };
    let rule = |req: u64| -> Result<SeccompRule, ConfineError> {
        let c =
            SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, req).map_err(sc)?;
        SeccompRule::new(vec![c]).map_err(sc)
    };
    let newuser = libc::CLONE_NEWUSER as u64;
    let masked = SeccompCmpOp::MaskedEq(newuser);
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_ioctl, vec![rule(TIOCSTI)?, rule(TIOCLINUX)?]);
    rules.insert(
        libc::SYS_clone,
        vec![cond(SeccompCmpArgLen::Qword, masked.clone(), newuser)?],
    );
    rules.insert(
        libc::SYS_unshare,
        vec![cond(SeccompCmpArgLen::Dword, masked.clone(), newuser)?],
    );
    // An empty list: refused whatever its arguments.
    rules.insert(libc::SYS_io_uring_setup, vec![]);
    let mut missing: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    missing.insert(libc::SYS_clone3, vec![]);
    #[cfg(target_arch = "x86_64")]
    {
        // The x32 ABI's calls: its own ioctl, and the others' numbers with the x32 bit.
        const X32: i64 = 0x4000_0000;
        rules.insert(X32 | 514, vec![rule(TIOCSTI)?, rule(TIOCLINUX)?]);
        rules.insert(
            X32 | libc::SYS_clone,
            vec![cond(SeccompCmpArgLen::Qword, masked.clone(), newuser)?],
        );
        rules.insert(
            X32 | libc::SYS_unshare,
            vec![cond(SeccompCmpArgLen::Dword, masked, newuser)?],
        );
        rules.insert(X32 | libc::SYS_io_uring_setup, vec![]);
        missing.insert(X32 | libc::SYS_clone3, vec![]);
    }
    let arch: seccompiler::TargetArch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| sc(e))?;
    for (rules, errno) in [(rules, libc::EPERM), (missing, libc::ENOSYS)] {
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno as u32),
            arch,
        )
        .map_err(sc)?;
        let program: BpfProgram = filter.try_into().map_err(sc)?;
        seccompiler::apply_filter(&program).map_err(|e| ConfineError::Seccomp(e.to_string()))?;
    }
    Ok(())
}
