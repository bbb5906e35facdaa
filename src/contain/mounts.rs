//! The client's view of the file system, built by PID 1 of the sandbox in its own mount namespace
//! (it holds every capability of the new user namespace until it drops them by `exec`) as a new
//! root, the way bubblewrap builds one: a tmpfs over `/tmp` becomes the root for a moment with
//! the old one under it at `/oldroot`, a second tmpfs `/newroot` receives what the plan shows
//! (bound from `/oldroot`), and a last `pivot_root` into it detaches the old root entirely. In
//! it: the system's directories read-only, empty private tmpfs mounts (`/tmp`, `/var/tmp`, `/run`,
//! the runtime directory, the home), the person's shown paths, read-only binds over what runs
//! later, the relay's socket where `vault mcp` looks for the agent, the vault directory holding
//! only `vault.id` and `config.toml`, a minimal `/dev` with a fresh `devpts`, a fresh `/proc` of
//! the new PID namespace. The root itself ends read-only.
use super::plan::Plan;
use rustix::fs::StatVfsMountFlags;
use rustix::mount::{
    mount, mount_bind, mount_bind_recursive, mount_change, mount_remount, unmount, MountFlags,
    MountPropagationFlags, UnmountFlags,
};
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

fn io_fail<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> MountError + 'a {
    move |source| MountError {
        what,
        path: path.display().to_string(),
        source,
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

/// The vault's files `vault mcp` reads, shown again inside the (otherwise empty) vault directory.
#[derive(Debug, Clone)]
pub struct VaultFiles {
    pub dir: PathBuf,
    pub files: Vec<PathBuf>,
}

const OLD: &str = "/oldroot";
const NEW: &str = "/newroot";

/// `p` (absolute) under `base`.
fn at(base: &str, p: &Path) -> PathBuf {
    Path::new(base).join(p.strip_prefix("/").unwrap_or(p))
}

/// Builds the view and enters it. Runs in PID 1 of the sandbox, before Landlock and seccomp.
pub(super) fn build(plan: &Plan, socket: Option<&SocketAt>, vault: &VaultFiles) -> Result<()> {
    let root = Path::new("/");
    mount_change(
        root,
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .map_err(fail("make private", root))?;
    // The base: a tmpfs over /tmp becomes the root for a moment; the old root goes under it.
    let base = Path::new("/tmp");
    tmpfs(base, c"mode=0755")?;
    for d in ["/tmp/oldroot", "/tmp/newroot"] {
        make_dirs(Path::new(d), 0o755)?;
    }
    rustix::process::pivot_root(base, "/tmp/oldroot").map_err(fail("pivot_root to", base))?;
    std::env::set_current_dir(root).map_err(io_fail("cd", root))?;
    let new = Path::new(NEW);
    tmpfs(new, c"mode=0755")?;

    for s in &plan.system {
        let to = at(NEW, s);
        make_dirs(&to, 0o755)?;
        mount_bind_recursive(at(OLD, s), &to).map_err(fail("show", s))?;
        read_only(&to)?;
    }
    // The private tmpfs mounts and the shown paths, parents before children.
    enum Step<'a> {
        Private(&'a Path),
        Show(&'a Path, bool),
    }
    let mut steps: Vec<Step> = plan
        .private
        .iter()
        .map(|p| Step::Private(p))
        .chain(plan.shown.iter().map(|s| Step::Show(&s.path, s.writable)))
        .collect();
    let depth = |s: &Step| match s {
        Step::Private(p) | Step::Show(p, _) => p.components().count(),
    };
    steps.sort_by_key(depth);
    for step in steps {
        match step {
            Step::Private(p) => {
                let to = at(NEW, p);
                make_dirs(&to, 0o755)?;
                let shared = p == Path::new("/tmp") || p == Path::new("/var/tmp");
                tmpfs(&to, if shared { c"mode=1777" } else { c"mode=0700" })?;
            }
            Step::Show(p, writable) => {
                let (from, to) = (at(OLD, p), at(NEW, p));
                if !from.exists() {
                    continue;
                }
                mountpoint(&to, from.is_dir())?;
                mount_bind(&from, &to).map_err(fail("show", p))?;
                if !writable {
                    read_only(&to)?;
                }
            }
        }
    }
    for (link, to) in &plan.links {
        let l = at(NEW, link);
        if std::fs::symlink_metadata(&l).is_err() {
            if let Some(parent) = l.parent() {
                let _ = make_dirs(parent, 0o755);
            }
            // Best effort: a link whose directory is shown read-only is there already.
            let _ = std::os::unix::fs::symlink(to, &l);
        }
    }
    for f in &plan.copies {
        let to = at(NEW, f);
        if let Ok(bytes) = std::fs::read(at(OLD, f)) {
            crate::paths::write_new_private(&to, &bytes).map_err(|e| MountError {
                what: "copy",
                path: f.display().to_string(),
                source: std::io::Error::other(e.to_string()),
            })?;
        }
    }
    for d in &plan.hidden_dirs {
        let to = at(NEW, d);
        if to.is_dir() {
            tmpfs(&to, c"mode=0500")?;
            read_only(&to)?;
        }
    }
    if !plan.hidden_files.is_empty() {
        let empty = at(NEW, Path::new("/tmp/.vault-run-empty"));
        std::fs::write(&empty, b"").map_err(io_fail("create", &empty))?;
        for f in &plan.hidden_files {
            let to = at(NEW, f);
            if to.is_file() {
                mount_bind(&empty, &to).map_err(fail("hide", f))?;
                read_only(&to)?;
            }
        }
        let _ = std::fs::remove_file(&empty);
    }
    show_vault(vault)?;
    if let Some(s) = socket {
        let to = at(NEW, &s.inside);
        mountpoint(&to, false)?;
        mount_bind(at(OLD, &s.outside), &to).map_err(fail("relay socket", &s.inside))?;
    }
    dev()?;
    let proc = at(NEW, Path::new("/proc"));
    make_dirs(&proc, 0o555)?;
    mount("proc", &proc, "proc", flags_nodev(), None).map_err(fail("mount", &proc))?;
    // What runs later, inside what is writable: read-only. Each repository's `.git` pinned.
    for p in &plan.pinned {
        let to = at(NEW, p);
        if to.is_dir() {
            mount_bind(&to, &to).map_err(fail("pin", p))?;
        }
    }
    for p in plan
        .read_only
        .iter()
        .filter(|_| !crate::mutation::off("read_only_guards"))
    {
        let to = at(NEW, p);
        if to.exists() {
            mount_bind(&to, &to).map_err(fail("bind", p))?;
            read_only(&to)?;
        }
    }
    let _ = std::os::unix::fs::symlink("/run", at(NEW, Path::new("/var/run")));
    // Into the new root; the old one (and the base tmpfs) detached.
    std::env::set_current_dir(new).map_err(io_fail("cd", new))?;
    rustix::process::pivot_root(".", ".").map_err(fail("pivot_root to", new))?;
    unmount(".", UnmountFlags::DETACH).map_err(fail("detach the old root", root))?;
    std::env::set_current_dir(root).map_err(io_fail("cd", root))?;
    read_only(root)
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

fn make_dirs(p: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(p)
        .map_err(io_fail("create", p))
}

/// An empty file or directory to mount on, where none is (inside the new root's tmpfs mounts:
/// never in the person's own directories, where every mount point already exists).
fn mountpoint(p: &Path, dir: bool) -> Result<()> {
    if std::fs::symlink_metadata(p).is_ok() {
        return Ok(());
    }
    if dir {
        return make_dirs(p, 0o755);
    }
    if let Some(parent) = p.parent() {
        make_dirs(parent, 0o755)?;
    }
    std::fs::write(p, b"").map_err(io_fail("create", p))
}

/// The vault directory: empty and read-only but for the public files `vault mcp` reads, bound
/// read-only from the real ones (a tmpfs over it where a shown path holds it).
fn show_vault(vault: &VaultFiles) -> Result<()> {
    let dir = at(NEW, &vault.dir);
    make_dirs(&dir, 0o700)?;
    tmpfs(&dir, c"mode=0700")?;
    for f in &vault.files {
        let to = at(NEW, f);
        mountpoint(&to, false)?;
        mount_bind(at(OLD, f), &to).map_err(fail("show", f))?;
        read_only(&to)?;
    }
    read_only(&dir)
}

/// `/dev`: a tmpfs with the harmless nodes bound in, a new `devpts` instance (the client's own
/// terminal stays open on its descriptors; the person's other terminals are not there), and the
/// usual links.
fn dev() -> Result<()> {
    let d = at(NEW, Path::new("/dev"));
    make_dirs(&d, 0o755)?;
    tmpfs(&d, c"mode=0755")?;
    for name in DEVICES {
        let (from, to) = (Path::new(OLD).join("dev").join(name), d.join(name));
        if std::fs::symlink_metadata(&from).is_err() {
            continue;
        }
        mountpoint(&to, false)?;
        mount_bind(&from, &to).map_err(fail("bind", &to))?;
    }
    let pts = d.join("pts");
    make_dirs(&pts, 0o755)?;
    mount(
        "devpts",
        &pts,
        "devpts",
        MountFlags::NOSUID | MountFlags::NOEXEC,
        Some(c"newinstance,ptmxmode=0666,mode=0620"),
    )
    .map_err(fail("mount devpts on", &pts))?;
    let shm = d.join("shm");
    make_dirs(&shm, 0o755)?;
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
