//! The client's view of the file system, built by PID 1 of the sandbox in its own mount namespace
//! (it holds every capability of the new user namespace until it drops them by `exec`): private
//! propagation, an empty tmpfs over `/tmp`, `/var/tmp`, `$XDG_RUNTIME_DIR` and `/run/screen`
//! (the sockets of tmux, screen, X11, Wayland, D-Bus, systemd and the agents live there), the
//! relay's socket where `vault mcp` looks for the agent, the vault directory and the secret files
//! replaced by empty read-only ones (the vault's `vault.id` and `config.toml` shown again, for
//! `vault mcp`), a minimal `/dev` with a fresh `devpts` (no way to the person's other terminals),
//! a fresh `/proc` of the new PID namespace, and read-only binds over what runs later.
use super::plan::Plan;
use rustix::fs::{Mode, OFlags, StatVfsMountFlags};
use rustix::mount::{
    mount, mount_bind, mount_change, mount_remount, MountFlags, MountPropagationFlags,
};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// A mount step that failed: what, where, and the kernel's word.
#[derive(Debug, thiserror::Error)]
#[error("{what} {path}: {source}")]
pub(super) struct MountError {
    pub(super) what: &'static str,
    pub(super) path: String,
    pub(super) source: std::io::Error,
}

type Result<T> = std::result::Result<T, MountError>;

fn fail<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(rustix::io::Errno) -> MountError + 'a {
    move |e| MountError {
        what,
        path: path.display().to_string(),
        source: e.into(),
    }
}

/// What the view needs from outside before the first mount hides it: the relay's socket, the
/// vault's public files, the device nodes, the paths under a private tmpfs to bring back.
pub(super) struct Held {
    fds: Vec<(PathBuf, OwnedFd)>,
}

impl Held {
    fn open(paths: impl IntoIterator<Item = PathBuf>) -> Self {
        let fds = paths
            .into_iter()
            .filter_map(|p| {
                let fd =
                    rustix::fs::open(&p, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).ok()?;
                Some((p, fd))
            })
            .collect();
        Self { fds }
    }

    /// `/proc/self/fd/N` of what was at `p`, to bind from once `p` is hidden.
    fn source(&self, p: &Path) -> Option<PathBuf> {
        self.fds
            .iter()
            .find(|(q, _)| q == p)
            .map(|(_, fd)| PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())))
    }
}

/// Device nodes the client keeps.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// Where the relay's socket goes inside, and where it is outside now.
#[derive(Debug, Clone)]
pub struct SocketAt {
    pub outside: PathBuf,
    pub inside: PathBuf,
}

/// The vault's files `vault mcp` reads, shown again inside the hidden vault directory.
#[derive(Debug, Clone)]
pub struct VaultFiles {
    pub dir: PathBuf,
    pub files: Vec<PathBuf>,
}

/// Builds the view. Runs in PID 1 of the sandbox, before Landlock and seccomp.
pub(super) fn build(plan: &Plan, socket: Option<&SocketAt>, vault: &VaultFiles) -> Result<()> {
    // Under a private tmpfs: what must come back (the project, allowed paths, the vault binary).
    let keep: Vec<(PathBuf, bool)> = plan
        .writable
        .iter()
        .chain(&plan.read_only)
        .filter(|p| plan.private.iter().any(|t| p.starts_with(t)) && p.exists())
        .map(|p| (p.clone(), p.is_dir()))
        .collect();
    let held = Held::open(
        DEVICES
            .iter()
            .map(|d| Path::new("/dev").join(d))
            .chain(socket.map(|s| s.outside.clone()))
            .chain(vault.files.iter().cloned())
            .chain(keep.iter().map(|(p, _)| p.clone())),
    );
    mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .map_err(fail("make private", Path::new("/")))?;
    for t in &plan.private {
        // Shared temporary directories keep their sticky, world-writable mode; the rest are ours.
        let shared = t == Path::new("/tmp") || t == Path::new("/var/tmp");
        // One may sit under another (a runtime directory under /tmp): made again there.
        mountpoint(t, true)?;
        tmpfs(t, if shared { c"mode=1777" } else { c"mode=0700" })?;
    }
    for (p, dir) in &keep {
        let src = held.source(p).ok_or_else(|| MountError {
            what: "keep",
            path: p.display().to_string(),
            source: std::io::ErrorKind::NotFound.into(),
        })?;
        mountpoint(p, *dir)?;
        mount_bind(&src, p).map_err(fail("bring back", p))?;
    }
    if let Some(s) = socket {
        if let Some(dir) = s.inside.parent() {
            make_dirs(dir)?;
        }
        mountpoint(&s.inside, false)?;
        let src = held.source(&s.outside).ok_or_else(|| MountError {
            what: "relay socket",
            path: s.outside.display().to_string(),
            source: std::io::ErrorKind::NotFound.into(),
        })?;
        mount_bind(&src, &s.inside).map_err(fail("relay socket", &s.inside))?;
    }
    // What a private tmpfs already hides is not there to hide again.
    for d in plan
        .hidden_dirs
        .iter()
        .filter(|d| **d != vault.dir && d.is_dir())
    {
        tmpfs(d, c"mode=0500")?;
        read_only(d)?;
    }
    hide_vault(vault, &held)?;
    let empty = Path::new("/tmp/.vault-run-empty");
    if !plan.hidden_files.is_empty() {
        std::fs::write(empty, b"").map_err(|e| MountError {
            what: "create",
            path: empty.display().to_string(),
            source: e,
        })?;
        for f in plan.hidden_files.iter().filter(|f| f.is_file()) {
            mount_bind(empty, f).map_err(fail("hide", f))?;
            read_only(f)?;
        }
        let _ = std::fs::remove_file(empty);
    }
    dev(&held)?;
    mount("proc", "/proc", "proc", flags_nodev(), None)
        .map_err(fail("mount", Path::new("/proc")))?;
    for p in &plan.read_only {
        if p.exists() {
            mount_bind(p, p).map_err(fail("bind", p))?;
            read_only(p)?;
        }
    }
    drop(held);
    Ok(())
}

fn flags_nodev() -> MountFlags {
    MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC
}

fn tmpfs(p: &Path, opts: &std::ffi::CStr) -> Result<()> {
    mount(
        "tmpfs",
        p,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV,
        Some(opts),
    )
    .map_err(fail("mount tmpfs on", p))
}

/// A bind mount made read-only, keeping the flags the kernel locked on the mount it came from
/// (a user namespace may not clear `nosuid`, `nodev`, `noexec` or the atime flags).
fn read_only(p: &Path) -> Result<()> {
    let locked = rustix::fs::statvfs(p)
        .map(|s| s.f_flag)
        .unwrap_or(StatVfsMountFlags::empty());
    let mut flags = MountFlags::BIND | MountFlags::RDONLY;
    for (have, set) in [
        (StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
        (StatVfsMountFlags::NODEV, MountFlags::NODEV),
        (StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
        (StatVfsMountFlags::NOATIME, MountFlags::NOATIME),
        (StatVfsMountFlags::NODIRATIME, MountFlags::NODIRATIME),
        (StatVfsMountFlags::RELATIME, MountFlags::RELATIME),
    ] {
        if locked.contains(have) {
            flags |= set;
        }
    }
    mount_remount(p, flags, "").map_err(fail("make read-only", p))
}

fn make_dirs(p: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(p)
        .map_err(|e| MountError {
            what: "create",
            path: p.display().to_string(),
            source: e,
        })
}

/// An empty file or directory to mount on, where none is.
fn mountpoint(p: &Path, dir: bool) -> Result<()> {
    if p.exists() {
        return Ok(());
    }
    if dir {
        return make_dirs(p);
    }
    if let Some(parent) = p.parent() {
        make_dirs(parent)?;
    }
    std::fs::write(p, b"").map_err(|e| MountError {
        what: "create",
        path: p.display().to_string(),
        source: e,
    })
}

/// The vault directory: an empty tmpfs, then read-only, holding only the public files `vault
/// mcp` reads (bound read-only from the real ones).
fn hide_vault(vault: &VaultFiles, held: &Held) -> Result<()> {
    if vault.files.is_empty() && !vault.dir.is_dir() {
        return Ok(());
    }
    // Under a private tmpfs it is already gone: made again there, as empty.
    mountpoint(&vault.dir, true)?;
    tmpfs(&vault.dir, c"mode=0700")?;
    for f in &vault.files {
        let Some(src) = held.source(f) else { continue };
        mountpoint(f, false)?;
        mount_bind(&src, f).map_err(fail("show", f))?;
        read_only(f)?;
    }
    read_only(&vault.dir)
}

/// `/dev`: a tmpfs with the harmless nodes bound in, a new `devpts` instance (the client's own
/// terminal stays open on its descriptors; the person's other terminals are not there), and the
/// usual links.
fn dev(held: &Held) -> Result<()> {
    let d = Path::new("/dev");
    tmpfs(d, c"mode=0755")?;
    for name in DEVICES {
        let p = d.join(name);
        let Some(src) = held.source(&p) else { continue };
        mountpoint(&p, false)?;
        mount_bind(&src, &p).map_err(fail("bind", &p))?;
    }
    let pts = d.join("pts");
    make_dirs(&pts)?;
    mount(
        "devpts",
        &pts,
        "devpts",
        MountFlags::NOSUID | MountFlags::NOEXEC,
        Some(c"newinstance,ptmxmode=0666,mode=0620"),
    )
    .map_err(fail("mount devpts on", &pts))?;
    let shm = d.join("shm");
    make_dirs(&shm)?;
    tmpfs(&shm, c"mode=1777")?;
    for (link, to) in [
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let _ = std::os::unix::fs::symlink(to, d.join(link));
    }
    Ok(())
}
