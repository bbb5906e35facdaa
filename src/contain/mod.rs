//! `vault run -- CLIENT`: the AI client in a sandbox the kernel enforces, as the same uid, with
//! no root and no setuid helper (docs/design.md §8, SECURITY.md "Containment").
//!
//! `vault run` (outside) checks what the kernel offers (`support`), makes the plan
//! (`plan.rs`), opens the relay's socket (`relay.rs`) and forks. The child moves into new user,
//! mount, PID, IPC and network namespaces (mapping the person's uid and gid to themselves; the
//! network's, unless `--network open`, reaches out only through `egress.rs`'s proxy) and forks PID
//! 1 of the new PID namespace, which builds the client's view (`mounts.rs`), makes itself
//! unreadable, applies Landlock and seccomp (`confine.rs`), drops its capabilities, forks the
//! client with the terminal, the project as working directory and the environment of the plan
//! (the client installs the creation gate's filter just before exec: `filter.rs`), and reaps
//! until the client ends, performing the calls the gate suspends meanwhile (`supervise.rs`).
//! When PID 1 ends, the kernel ends every process left in the namespace; when `vault run`
//! ends, a parent-death signal ends PID 1. Setup errors come back to `vault run` over a pipe
//! that closes when the client is exec'd.
pub mod ask;
mod body;
mod calls;
pub mod clients;
mod confine;
pub mod egress;
mod filter;
pub mod gate;
pub mod guard;
pub mod intercept;
mod meta_calls;
mod mounts;
pub mod plan;
mod relay;
mod resolve;
mod supervise;

pub use mounts::{SocketAt, VaultFiles};
pub use plan::{Plan, PlanError, Spec};
pub use relay::{Listener, Names};

use crate::sys::sandbox::{self, Disposition, Forked};
use std::ffi::CString;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Why `vault run` did not start the client, or could not contain it.
#[derive(Debug, thiserror::Error)]
pub enum ContainError {
    #[error("this kernel does not let an unprivileged user create namespaces ({why}), so `vault run` cannot contain the client and starts nothing. {fix}")]
    NoUserNamespaces { why: String, fix: &'static str },
    #[error("this kernel has Landlock ABI {abi}; containing the client needs ABI 6 (Linux 6.12) for its scopes (no signals or abstract sockets to the outside). `vault run` starts nothing. Run a newer kernel, or pass --allow-weaker to start a sandbox without them (its actions are then not marked contained)")]
    NoLandlock { abi: u32 },
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("setting up the sandbox failed: {0}; nothing was started")]
    Setup(String),
    #[error("cannot start {program} inside the sandbox: {why}. The sandbox shows the system's directories, the client's own installation and the project; if the client needs files elsewhere, show them with --allow-read PATH (or --allow-write PATH)")]
    Exec { program: String, why: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// What the kernel offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    /// `Err(why)` when an unprivileged user namespace cannot be made.
    pub userns: Result<(), String>,
    pub landlock_abi: u32,
}

/// The one change that enables unprivileged user namespaces where they are off.
pub fn userns_fix() -> &'static str {
    if std::path::Path::new("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").exists() {
        "On Ubuntu 24.04 and later, AppArmor restricts them: `sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0` (or an AppArmor profile for `vault` that allows `userns`)"
    } else if std::path::Path::new("/proc/sys/kernel/unprivileged_userns_clone").exists() {
        "Enable them: `sudo sysctl kernel.unprivileged_userns_clone=1`"
    } else {
        "Enable them: `sudo sysctl user.max_user_namespaces=15000` (it is 0, or a limit is reached)"
    }
}

impl Support {
    /// What `vault run` knows before it forks: the Landlock ABI. Whether a user namespace can be
    /// made it learns by making one (the child reports a refusal as `NoUserNamespaces`).
    pub fn without_probe() -> Self {
        Self {
            userns: Ok(()),
            landlock_abi: sandbox::landlock_abi(),
        }
    }

    /// Probes by doing it: a child that tries to make a user namespace (`vault doctor`).
    pub fn probe() -> Self {
        let userns = match sandbox::fork() {
            Ok(Forked::Child) => {
                let code = match sandbox::unshare(libc::CLONE_NEWUSER) {
                    Ok(()) => 0,
                    Err(e) => e.raw_os_error().unwrap_or(1),
                };
                sandbox::exit_now(code)
            }
            Ok(Forked::Parent { child }) => match wait(child) {
                0 => Ok(()),
                libc::ENOSPC => {
                    Err("user.max_user_namespaces is 0, or its limit is reached".into())
                }
                libc::EPERM => Err("not permitted for an unprivileged user".into()),
                errno => Err(std::io::Error::from_raw_os_error(errno).to_string()),
            },
            Err(e) => Err(e.to_string()),
        };
        Self {
            userns,
            landlock_abi: sandbox::landlock_abi(),
        }
    }

    /// Whether the sandbox has everything (`vault run` then marks its actions contained).
    pub fn full(&self) -> bool {
        self.userns.is_ok() && self.landlock_abi >= 6
    }

    /// One line: what is contained on this kernel; `network`: with a network namespace of its
    /// own (not under `--network open`).
    pub fn describe(&self, network: bool) -> String {
        let ll = match self.landlock_abi {
            0 => "no Landlock".to_owned(),
            n if n >= 9 => {
                format!("Landlock ABI {n}: files, named and abstract Unix sockets, signals")
            }
            n if n >= 6 => format!("Landlock ABI {n}: files, abstract Unix sockets, signals"),
            n => format!(
                "Landlock ABI {n}: files only (no scopes: abstract sockets and signals are open)"
            ),
        };
        let ns = if network {
            "user, mount, PID, IPC and network namespaces"
        } else {
            "user, mount, PID and IPC namespaces"
        };
        format!("{ns}; {ll}; seccomp: no TIOCSTI")
    }
}

/// Everything the child needs, made before the fork.
pub struct Launch {
    pub plan: Plan,
    /// The client's executable (resolved on `PATH`) and its arguments (`argv[0]` included).
    pub program: CString,
    pub argv: Vec<CString>,
    pub cwd: PathBuf,
    pub socket: Option<SocketAt>,
    pub vault: VaultFiles,
    pub weaker_ok: bool,
    /// The person's umask (before `vault run` made its own 077): the client's.
    pub umask: u32,
    /// The hosts the sandbox may reach through the proxy (`egress.rs`), in a network namespace
    /// of its own; `None`: the person's network (`--network open`).
    pub network: Option<egress::Allow>,
    /// The credentials whose placeholders the proxy swaps (`vault run --env`).
    pub swaps: intercept::Swaps,
}

/// The exit code of a child from its wait status (128 + the signal that ended it).
fn wait(pid: i32) -> i32 {
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return 1;
    };
    loop {
        match rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()) {
            Ok(Some((_, st))) => return code_of(st),
            Ok(None) => continue,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return 1,
        }
    }
}

fn code_of(st: rustix::process::WaitStatus) -> i32 {
    if let Some(c) = st.exit_status() {
        c
    } else if let Some(s) = st.terminating_signal() {
        128 + s
    } else {
        1
    }
}

/// Starts the client contained and waits for it; returns its exit code. Called while this
/// process has no thread but the main one (`relay` starts its threads after the fork).
/// `relay`: the relay's listener, the vault, and whether its sessions are marked contained (not
/// for a weaker sandbox).
pub fn run(
    launch: Launch,
    relay: Option<(Listener, crate::paths::VaultPaths, bool)>,
) -> Result<i32, ContainError> {
    let (mut errors, report) = std::io::pipe()?;
    let (uid, gid) = (
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw(),
    );
    // A wrapper: the terminal's Ctrl-C and Ctrl-\ are for the client.
    sandbox::set_signal(libc::SIGINT, Disposition::Ignore);
    sandbox::set_signal(libc::SIGQUIT, Disposition::Ignore);
    // The proxy's listening socket comes out of the sandbox's network namespace on this pair;
    // without it the child makes no network namespace.
    let proxy = match launch.network {
        Some(_) if !crate::mutation::off("network_namespace") => {
            Some(std::os::unix::net::UnixStream::pair()?)
        }
        _ => None,
    };
    let me = rustix::process::getpid();
    let outer = match sandbox::fork()? {
        Forked::Child => {
            drop(errors);
            die_with(me);
            let inside = proxy.map(|(_, theirs)| theirs);
            let code = match namespaces(uid, gid, inside.is_some()) {
                Ok(()) => pid_one(&launch, report, inside),
                Err(e) => tell(report, &e),
            };
            sandbox::exit_now(code)
        }
        Forked::Parent { child } => child,
    };
    drop(report);
    if let (Some((ours, theirs)), Some(allow)) = (proxy, &launch.network) {
        drop(theirs);
        // A host the allow list does not name waits for the person's card, when there is a
        // vault to ask (there always is: `vault run` needs one); else it is refused.
        let asker = relay.as_ref().map(|(_, paths, _)| {
            let program =
                std::path::Path::new(std::ffi::OsStr::from_bytes(launch.program.as_bytes()));
            let name = program
                .file_name()
                .map_or("client".into(), |n| n.to_string_lossy().into_owned());
            std::sync::Arc::new(ask::Asker::start(paths.clone(), &name))
        });
        egress::serve(ours, allow.clone(), asker, launch.swaps);
    }
    let names = relay.map(|(listener, paths, mark)| listener.serve(paths, mark, outer));
    let mut said = String::new();
    let _ = errors.read_to_string(&mut said);
    // The client runs (or setup failed): the sandbox holds its own bind of the socket.
    if let Some(n) = &names {
        n.remove();
    }
    let code = wait(outer);
    match said.split_once(':') {
        Some(("userns", why)) => Err(ContainError::NoUserNamespaces {
            why: why.trim().to_owned(),
            fix: userns_fix(),
        }),
        Some(("exec", why)) => Err(ContainError::Exec {
            program: launch.program.to_string_lossy().into_owned(),
            why: why.trim().to_owned(),
        }),
        Some((_, why)) => Err(ContainError::Setup(why.trim().to_owned())),
        None => Ok(code),
    }
}

/// Reports a setup error to `vault run` (`kind: text`) and gives the code to exit with.
fn tell(mut report: std::io::PipeWriter, what: &str) -> i32 {
    let _ = report.write_all(what.as_bytes());
    125
}

/// Ends this (forked) process when `parent` does: a parent-death signal, and at once if the
/// parent was already gone before it was set.
fn die_with(parent: rustix::process::Pid) {
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    if rustix::process::getppid() != Some(parent) {
        sandbox::exit_now(1);
    }
}

/// In the first child: the new namespaces (the network's too unless it is open), with the
/// person's uid and gid mapped to themselves.
fn namespaces(uid: u32, gid: u32, network: bool) -> Result<(), String> {
    let flags = sandbox::NEW_NAMESPACES | if network { sandbox::NEW_NETWORK } else { 0 };
    sandbox::unshare(flags).map_err(|e| format!("userns: {e}"))?;
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text)
            .map_err(|e| format!("setup: writing /proc/self/{file}: {e}"))
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("{uid} {uid} 1"))?;
    write("gid_map", format!("{gid} {gid} 1"))?;
    Ok(())
}

/// In the first child, after the namespaces: forks PID 1, waits for it, exits with its code.
fn pid_one(
    launch: &Launch,
    report: std::io::PipeWriter,
    proxy: Option<std::os::unix::net::UnixStream>,
) -> i32 {
    match sandbox::fork() {
        Ok(Forked::Child) => {
            // PID 1 sees its parent as pid 0 (outside its namespace): the signal alone guards it.
            let _ = rustix::process::set_parent_process_death_signal(Some(
                rustix::process::Signal::KILL,
            ));
            sandbox::exit_now(init(launch, report, proxy))
        }
        Ok(Forked::Parent { child }) => {
            drop(report);
            wait(child)
        }
        Err(e) => tell(report, &format!("setup: fork: {e}")),
    }
}

/// PID 1 of the sandbox: builds the view, confines itself (and so all it starts), starts the
/// client and reaps every process until the client ends.
fn init(
    launch: &Launch,
    report: std::io::PipeWriter,
    proxy: Option<std::os::unix::net::UnixStream>,
) -> i32 {
    // The network namespace's loopback, and the proxy's port on it, while PID 1 has the
    // capability over the namespace.
    if let Some(to) = proxy {
        if let Err(e) = egress::listen_inside(&to) {
            return tell(report, &format!("setup: the network's proxy port: {e}"));
        }
    }
    if let Err(e) = mounts::build(&launch.plan, launch.socket.as_ref(), &launch.vault) {
        return tell(report, &format!("setup: {e}"));
    }
    if let Err(e) = std::env::set_current_dir(&launch.cwd) {
        return tell(report, &format!("setup: cd {}: {e}", launch.cwd.display()));
    }
    // What the metadata gate keeps, by device and inode, in the view just built (its paths are
    // those outside; a bind shows the same inode).
    let kept = supervise::kept_inodes(&launch.plan.kept);
    // No process of the sandbox may trace PID 1, which holds the namespace's capabilities (the
    // flag is PID 1's own: the client's exec resets it; no core limit is imposed on the client).
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    if let Err(e) = confine::landlock(&launch.plan, launch.weaker_ok) {
        return tell(report, &format!("setup: {e}"));
    }
    if let Err(e) = confine::seccomp() {
        return tell(report, &format!("setup: {e}"));
    }
    // The creation gate (`supervise.rs`): the client's child installs its filter and hands the
    // listener to PID 1, which answers the suspended calls with no capability left. Off only in
    // a debug build, by `VAULT_RUN_GATE=off` (to measure its cost, and for the test's control).
    let gate_off =
        cfg!(debug_assertions) && std::env::var_os("VAULT_RUN_GATE").is_some_and(|v| v == "off");
    let gate = if gate_off {
        // The sandbox's own line on PID 1's stderr (it has no CLI to print through).
        let _ = writeln!(std::io::stderr(), "vault run: the creation gate is OFF (VAULT_RUN_GATE=off, a debug build's switch): a repository can be planted");
        None
    } else {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let program = filter::kernel_supports(&release).and_then(|()| filter::program());
        let pair = rustix::net::socketpair(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::SEQPACKET,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        );
        match (program, pair) {
            (Ok(p), Ok(pair)) => Some((p, pair)),
            (Err(e), _) => return tell(report, &format!("setup: {e}")),
            (_, Err(e)) => return tell(report, &format!("setup: socketpair: {e}")),
        }
    };
    if let Err(e) = supervise::drop_capabilities() {
        return tell(
            report,
            &format!("setup: dropping PID 1's capabilities: {e}"),
        );
    }
    let env: Vec<CString> = launch
        .plan
        .env
        .iter()
        .filter_map(|(k, v)| {
            let mut kv = k.clone();
            kv.push("=");
            kv.push(v);
            CString::new(std::os::unix::ffi::OsStringExt::into_vec(kv)).ok()
        })
        .collect();
    let (gate, theirs) = match gate {
        Some((program, (ours, theirs))) => (Some((program, ours)), Some(theirs)),
        None => (None, None),
    };
    let client = match sandbox::fork() {
        Ok(Forked::Child) => {
            for sig in [libc::SIGINT, libc::SIGQUIT, libc::SIGPIPE] {
                sandbox::set_signal(sig, Disposition::Default);
            }
            // The person's umask, and no descriptor but the terminal's three: whatever the
            // launcher left open (and `vault run`'s own) closes at the exec.
            rustix::process::umask(rustix::fs::Mode::from_raw_mode(launch.umask));
            if let (Some((program, ours)), Some(theirs)) = (gate, theirs) {
                drop(ours);
                if let Err(e) = supervise::hand_over(&program, theirs) {
                    sandbox::exit_now(tell(report, &format!("setup: the creation gate: {e}")));
                }
            }
            if let Err(e) = sandbox::close_on_exec_from(3) {
                sandbox::exit_now(tell(report, &format!("setup: closing descriptors: {e}")));
            }
            let e = sandbox::exec(&launch.program, &launch.argv, &env);
            sandbox::exit_now(tell(report, &format!("exec: {e}")))
        }
        Ok(Forked::Parent { child }) => child,
        Err(e) => return tell(report, &format!("setup: fork: {e}")),
    };
    drop(report);
    drop(theirs);
    let gate = gate
        .and_then(|(_, ours)| supervise::take_listener(&ours))
        .map(|l| supervise::Gate::new(l, &launch.plan.gate, kept));
    supervise::supervise(gate, client)
}
