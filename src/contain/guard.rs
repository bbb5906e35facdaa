//! What must not change inside `vault run`'s writable paths because something outside runs or
//! trusts it later (docs/design.md §8, issue 45 "nothing planted for later"): every repository in
//! and under the project (its config, hooks, the redirects git follows), the project files that
//! editors and MCP clients run or trust, the client's hook settings in its state, the shell's and
//! the desktop's start-up files where a writable path holds them, the client's installation and
//! the vault's binary. What exists is bound read-only; what does not is named for the creation
//! gate; a repository's `.git` is pinned so it cannot be renamed away. Also where the client's
//! installation is, so that it can be shown read-only.
use super::clients::{ClientFacts, PROJECT_RUNS_LATER};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// At most this many entries of the project are looked at for repositories; a larger project
/// is refused (a repository not found would be left writable).
pub const MAX_ENTRIES: usize = 400_000;

/// What inside a git directory sends git to code or to another configuration: read-only where
/// it is, not to be created where it is not.
const GIT_DIR_GUARDED: &[&str] = &[
    "config",
    "hooks",
    "info",
    "commondir",
    "config.worktree",
    "modules",
    "worktrees",
];

/// The repositories in and under `project`: each git directory, and each `.git` file (a
/// worktree's or a submodule's pointer) with the directories it names. `node_modules` is not
/// entered. Err when the project has more than `MAX_ENTRIES` entries.
pub fn repositories(project: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>), String> {
    let (mut dirs, mut files) = (Vec::new(), Vec::new());
    let mut seen = 0usize;
    let mut todo = vec![project.to_owned()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                return Err(format!(
                    "{} has more than {MAX_ENTRIES} entries, too many to find every repository in it before the client starts; run vault run in a narrower --project",
                    project.display()
                ));
            }
            let Ok(t) = e.file_type() else { continue };
            let name = e.file_name();
            let p = e.path();
            if name == ".git" {
                if t.is_dir() {
                    dirs.push(p.clone());
                    submodules(&p.join("modules"), &mut dirs);
                } else if t.is_file() {
                    files.push(p.clone());
                    dirs.extend(pointed(&p));
                }
            } else if t.is_dir() && name != "node_modules" {
                todo.push(p);
            }
        }
    }
    dirs.sort();
    dirs.dedup();
    Ok((dirs, files))
}

/// The git directories a `.git` file names: its `gitdir:` and that directory's `commondir`.
fn pointed(file: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(text) = std::fs::read_to_string(file) else {
        return out;
    };
    let Some(g) = text.trim().strip_prefix("gitdir:") else {
        return out;
    };
    let base = file.parent().unwrap_or(Path::new("/"));
    let g = base.join(g.trim());
    if let Ok(common) = std::fs::read_to_string(g.join("commondir")) {
        out.push(g.join(common.trim()));
    }
    out.push(g);
    out
}

/// Submodules' git directories under a repository's `modules/` (any depth: `a/b` names).
fn submodules(modules: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(modules) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if !p.is_dir() {
            continue;
        }
        if p.join("HEAD").is_file() {
            out.push(p.clone());
            submodules(&p.join("modules"), out);
        } else {
            submodules(&p, out);
        }
    }
}

/// The project's git files that run later (`hooks/`, `config`, …) for each repository found
/// in or under it (kept for `vault doctor` and tests: what `guard` binds).
pub fn git_guarded(project: &Path) -> Vec<PathBuf> {
    let (dirs, _) = repositories(project).unwrap_or_default();
    dirs.iter()
        .flat_map(|d| GIT_DIR_GUARDED.iter().map(move |g| d.join(g)))
        .collect()
}

/// Files that run later, outside, and so are never writable from inside: shell start-up files,
/// autostart entries, user units, the person's own programs (where a writable path holds them).
pub const NEVER_WRITABLE: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".gitconfig",
    ".config/git",
    ".config/fish",
    ".config/autostart",
    ".config/systemd",
    ".config/environment.d",
    ".local/bin",
    ".local/share/systemd",
    ".xprofile",
    ".xsessionrc",
];

/// What the writable paths hold that must not change.
#[derive(Debug, Default)]
pub struct Guards {
    /// The git directories of the repositories in and under the project (where git itself
    /// makes `HEAD`, `refs`, `objects`, … inside the sandbox).
    pub git_dirs: Vec<PathBuf>,
    pub read_only: Vec<PathBuf>,
    pub pinned: Vec<PathBuf>,
    pub must_not_create: Vec<PathBuf>,
    pub placeholders: Vec<(PathBuf, &'static str)>,
}

/// Why guards cannot be set.
#[derive(Debug)]
pub enum GuardError {
    /// A writable path holds a start-up file's place, empty: the client could create it.
    WouldCreate { given: PathBuf, missing: PathBuf },
    /// The project could not be searched for repositories.
    Search(String),
}

/// The guards for what `writable` holds, given the home, the project and the client.
pub fn guards(
    writable: &[PathBuf],
    home: &Path,
    project: &Path,
    client: Option<&ClientFacts>,
) -> Result<Guards, GuardError> {
    let under_writable = |p: &Path| writable.iter().find(|w| p.starts_with(w)).cloned();
    let mut g = Guards::default();
    // Start-up files of the shell and the desktop: never made writable (no gate covers the home
    // yet: a writable path that would let one be created is refused).
    for f in NEVER_WRITABLE.iter().map(|p| home.join(p)) {
        if let Some(root) = under_writable(&f) {
            if f.exists() {
                g.read_only.push(f);
            } else {
                return Err(GuardError::WouldCreate {
                    given: root,
                    missing: f,
                });
            }
        }
    }
    // The client's hook settings in its state: read-only; a missing one is made empty first.
    if let Some(c) = client {
        for p in c.runs_later.iter().map(|p| home.join(p)) {
            if under_writable(&p).is_none() {
                continue;
            }
            if !p.exists() {
                let dir = p.extension().is_none();
                g.placeholders
                    .push((p.clone(), if dir { "" } else { placeholder(&p) }));
            }
            g.read_only.push(p);
        }
    }
    // Every repository in and under the project.
    let (dirs, files) = repositories(project).map_err(GuardError::Search)?;
    for d in &dirs {
        if under_writable(d).is_none() {
            continue;
        }
        g.git_dirs.push(d.clone());
        g.pinned.push(d.clone());
        for p in GIT_DIR_GUARDED.iter().map(|e| d.join(e)) {
            if p.exists() || p.ends_with("hooks") {
                g.read_only.push(p);
            } else {
                g.must_not_create.push(p);
            }
        }
    }
    g.read_only
        .extend(files.into_iter().filter(|f| under_writable(f).is_some()));
    // What editors and MCP clients run or trust in the project.
    for p in PROJECT_RUNS_LATER.iter().map(|p| project.join(p)) {
        if p.exists() {
            g.read_only.push(p);
        } else {
            g.must_not_create.push(p);
        }
    }
    Ok(g)
}

/// What a missing hook-settings file of a client's state is made as: the empty value of its
/// format, which the client reads as "nothing set".
fn placeholder(p: &Path) -> &'static str {
    match p.extension().and_then(|e| e.to_str()) {
        Some("json") => "{}\n",
        _ => "",
    }
}

/// The client's installation, to show read-only, and the links on the way to it to make again
/// inside: the program as found and its real file's root, and the same for the interpreter its
/// `#!` line names. A root is the innermost `node_modules` holding the file, or a prefix whose
/// `bin/` holds it (nvm's `versions/node/vX`, pyenv's, bun's), else the file alone.
pub fn installation(
    program: &Path,
    home: &Path,
    env: &[(OsString, OsString)],
) -> (Vec<PathBuf>, Vec<(PathBuf, PathBuf)>) {
    let (mut roots, mut links) = (Vec::new(), Vec::new());
    let add = |p: &Path, roots: &mut Vec<PathBuf>, links: &mut Vec<(PathBuf, PathBuf)>| {
        if let Ok(to) = std::fs::read_link(p) {
            links.push((p.to_owned(), to));
        }
        if let Ok(real) = std::fs::canonicalize(p) {
            roots.push(root_of(&real, home));
            return Some(real);
        }
        None
    };
    let Some(real) = add(program, &mut roots, &mut links) else {
        return (roots, links);
    };
    if let Some(interp) = interpreter(&real, env) {
        add(&interp, &mut roots, &mut links);
    }
    (roots, links)
}

fn root_of(real: &Path, home: &Path) -> PathBuf {
    if let Some(nm) = real
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "node_modules"))
    {
        return nm.to_owned();
    }
    let shared = [
        home.to_owned(),
        home.join(".local"),
        home.join(".cargo"),
        PathBuf::from("/usr"),
        PathBuf::from("/usr/local"),
        PathBuf::from("/"),
    ];
    match real.parent() {
        Some(bin) if bin.file_name().is_some_and(|n| n == "bin") => match bin.parent() {
            Some(prefix) if !shared.iter().any(|s| s == prefix) => prefix.to_owned(),
            _ => real.to_owned(),
        },
        _ => real.to_owned(),
    }
}

/// The interpreter a script's `#!` line names (`/usr/bin/env NAME` looked up on `PATH`).
fn interpreter(script: &Path, env: &[(OsString, OsString)]) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let first = words.next()?;
    if Path::new(first).file_name()? != "env" {
        return Some(PathBuf::from(first));
    }
    let name = words.find(|w| !w.starts_with('-'))?;
    on_path(name, env)
}

fn on_path(name: &str, env: &[(OsString, OsString)]) -> Option<PathBuf> {
    let path = env.iter().find(|(k, _)| k == "PATH")?.1.clone();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|c| c.is_file())
}

/// Links named `names` on `PATH` that lead to `target` (the vault's `vault` and `agent-vault`),
/// to make again inside where their directory is not shown.
pub fn links_to(
    target: &Path,
    names: &[&str],
    env: &[(OsString, OsString)],
) -> Vec<(PathBuf, PathBuf)> {
    let Some(path) = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v) else {
        return Vec::new();
    };
    std::env::split_paths(path)
        .flat_map(|d| names.iter().map(move |n| d.join(n)))
        // One cheap lstat where nothing is (most of PATH), a canonicalize only for a link.
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_symlink()))
        .filter(|p| std::fs::canonicalize(p).is_ok_and(|r| r == target))
        .filter_map(|p| Some((p.clone(), std::fs::read_link(&p).ok()?)))
        .collect()
}
