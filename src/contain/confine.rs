//! The kernel's limits on the client, applied by PID 1 once the view is built and inherited by
//! every process it starts: a Landlock domain (read everywhere, write only where the plan says;
//! no signal and no abstract Unix socket outside the domain, ABI 6 scopes; and, where the kernel
//! has ABI 9, no named Unix socket outside the writable paths), no new privileges, and a seccomp
//! filter (compiled by `seccompiler`) that refuses the ioctls that push input into a terminal
//! (`TIOCSTI`, `TIOCLINUX`), so nothing typed from inside reaches the person's shell after the run.
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

/// Installs the seccomp filter: `ioctl(_, TIOCSTI | TIOCLINUX, _)` fails with `EPERM`, every
/// other call is allowed (the request is compared as the kernel reads it, 32 bits).
pub(super) fn seccomp() -> Result<(), ConfineError> {
    if crate::mutation::off("tiocsti") {
        return Ok(());
    }
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };
    let sc = |e: seccompiler::BackendError| ConfineError::Seccomp(e.to_string());
    let rule = |req: u64| -> Result<SeccompRule, ConfineError> {
        let c =
            SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, req).map_err(sc)?;
        SeccompRule::new(vec![c]).map_err(sc)
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_ioctl, vec![rule(TIOCSTI)?, rule(TIOCLINUX)?]);
    #[cfg(target_arch = "x86_64")]
    {
        // The x32 ABI's ioctl (its own number, with the x32 bit).
        rules.insert(0x4000_0000 | 514, vec![rule(TIOCSTI)?, rule(TIOCLINUX)?]);
    }
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| sc(e))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(sc)?;
    let program: BpfProgram = filter.try_into().map_err(sc)?;
    seccompiler::apply_filter(&program).map_err(|e| ConfineError::Seccomp(e.to_string()))
}
