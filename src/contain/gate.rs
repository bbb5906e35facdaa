//! What the client may not create in the person's own directories (issue 45, "nothing planted for
//! later"): a repository (a `.git` directory or file, a bare repository's `HEAD`) that the
//! person's git or IDE would open later, outside, and run its configuration; and the exact paths
//! the plan protects that do not exist yet. Mounts cannot refuse a name that does not exist and
//! Landlock has no rule for names, so PID 1 checks every creation against these rules
//! (`supervise.rs`); it also refuses every metadata change of what the plan keeps
//! (`Plan::kept`), and says so in the words of `Refusal`. Pure: paths in, a verdict out.
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};

/// The names that make a repository: a `.git` directory or file (a `gitdir:` redirect), and the
/// `HEAD` without which git does not take a directory for a (bare) repository.
pub const REPOSITORY_NAMES: &[&str] = &[".git", "HEAD"];

/// What may not be created, decided on absolute paths as the view names them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GateRules {
    /// Real trees the gate applies to (the writable binds of the person's directories); paths
    /// elsewhere (the private /tmp, the sandbox's own tmpfs home) are never refused.
    pub trees: Vec<PathBuf>,
    /// Absolute paths that may not be created, nor anything beneath them.
    pub refused: Vec<PathBuf>,
    /// Entry names that may not be created anywhere in `trees` (".git", "HEAD"), nor anything
    /// beneath an entry of that name, except beneath `allowed_under`. Compared without regard
    /// to ASCII case: on a case-folding directory (ext4 `+F`, vfat) `.GIT` is `.git`.
    pub refused_names: Vec<OsString>,
    /// Existing git directories, where git itself creates HEAD, HEAD.lock → HEAD, refs,
    /// objects…: beneath one, a name is judged by git's own layout instead (`in_git_dir`).
    pub allowed_under: Vec<PathBuf>,
}

/// Why a creation was refused, said to the person in one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `path` would make (or lies inside) a repository that git would open later.
    Repository { path: PathBuf },
    /// `path` is, or lies beneath, `protected`, which the person's own tools run or trust.
    Protected { path: PathBuf, protected: PathBuf },
    /// `what` of `path` (`Plan::kept`: a writable root, a git directory, what holds a protected
    /// name) would have changed: "the mode", "the owner"…
    Metadata { path: PathBuf, what: &'static str },
}

impl Refusal {
    /// The path whose creation was refused.
    pub fn path(&self) -> &Path {
        match self {
            Refusal::Repository { path }
            | Refusal::Protected { path, .. }
            | Refusal::Metadata { path, .. } => path,
        }
    }

    /// The call's error: `EACCES` for a creation (as a directory the caller may not write
    /// answers), `EPERM` for a metadata change (as a file the caller does not own answers).
    pub fn errno(&self) -> i32 {
        match self {
            Refusal::Repository { .. } | Refusal::Protected { .. } => libc::EACCES,
            Refusal::Metadata { .. } => libc::EPERM,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Repository { path } => write!(
                f,
                "vault run: refused creating {}: a repository made inside your directories would \
                 run its configuration in your own git later (an IDE runs `git status` in every \
                 repository it finds); clone or init it outside the sandbox, or under /tmp inside",
                path.display()
            ),
            Refusal::Protected { path, protected } => write!(
                f,
                "vault run: refused creating {}: your own tools run or trust {} outside the \
                 sandbox, so it is never made from inside; create it yourself outside `vault run` \
                 if you want it (it is then read-only inside)",
                path.display(),
                protected.display()
            ),
            Refusal::Metadata { path, what } => write!(
                f,
                "vault run: refused changing {what} of {}: the sandbox keeps the mode, owner, \
                 times and ACLs of your project, its repositories' git directories and the other \
                 writable paths' roots as they are (made loose, one would let another user \
                 replace what your git or editor runs later); change it yourself outside \
                 `vault run` if you mean to",
                path.display()
            ),
        }
    }
}

/// Whether `name` is one of `names`, ignoring ASCII case.
fn named(name: &OsStr, names: &[OsString]) -> bool {
    names.iter().any(|n| {
        n.as_encoded_bytes()
            .eq_ignore_ascii_case(name.as_encoded_bytes())
    })
}

/// Whether creating `rel` (a path beneath a git directory) is what git itself does. A directory
/// that holds `HEAD` and `objects` and `refs` (or a `commondir`) is a repository to git, and a
/// symbolic link made elsewhere can lead the person's git into it; so inside the git directory
/// each of those names may be made only where git makes it: `HEAD` at the top, in `logs/` and
/// beneath `refs/` and `logs/refs/` (`refs/remotes/origin/HEAD`), `objects` at the top, `refs`
/// at the top and beneath `logs/`, `refs/`; `commondir` and `.git` nowhere (no worktree or
/// submodule is made inside: their `.git` files are refused anyway).
fn in_git_dir(rel: &Path) -> bool {
    let Some(name) = rel.file_name() else {
        return true;
    };
    let is = |n: &str| name.as_encoded_bytes().eq_ignore_ascii_case(n.as_bytes());
    let under_refs = rel.starts_with("refs") || rel.starts_with("logs/refs");
    if is(".git") || is("commondir") {
        false
    } else if is("HEAD") {
        rel == Path::new("HEAD") || rel == Path::new("logs/HEAD") || under_refs
    } else if is("objects") {
        rel == Path::new("objects")
    } else if is("refs") {
        rel == Path::new("refs") || rel == Path::new("logs/refs") || under_refs
    } else {
        true
    }
}

impl GateRules {
    /// Whether creating `abs` (absolute, as the view names it) is refused, and why. Only paths
    /// inside `trees` are judged.
    pub fn refuses(&self, abs: &Path) -> Option<Refusal> {
        let tree = self.tree_of(abs)?;
        if let Some(p) = self.refused.iter().find(|p| abs.starts_with(p)) {
            return Some(Refusal::Protected {
                path: abs.to_owned(),
                protected: p.clone(),
            });
        }
        let made = match self.git_dir_of(abs) {
            // Beneath a git directory git itself uses, what git makes, where git makes it.
            Some(g) => !in_git_dir(abs.strip_prefix(g).unwrap_or(abs)),
            None => abs
                .strip_prefix(tree)
                .unwrap_or(abs)
                .components()
                .any(|c| named(c.as_os_str(), &self.refused_names)),
        };
        made.then(|| Refusal::Repository {
            path: abs.to_owned(),
        })
    }

    /// Whether moving `from` to `to` (a rename) is refused: either path refused, or a move into
    /// or out of a git directory within the trees. Git never moves anything across that border,
    /// and a directory that crossed it could carry a `HEAD` out, or be dressed as a repository
    /// inside.
    pub fn refuses_move(&self, from: &Path, to: &Path) -> Option<Refusal> {
        if let Some(r) = self.refuses(to).or_else(|| self.refuses(from)) {
            return Some(r);
        }
        let crossing = self.git_dir_of(from) != self.git_dir_of(to)
            && self.tree_of(from).is_some()
            && self.tree_of(to).is_some();
        crossing.then(|| Refusal::Repository {
            path: to.to_owned(),
        })
    }

    fn tree_of(&self, abs: &Path) -> Option<&PathBuf> {
        self.trees
            .iter()
            .filter(|t| abs.starts_with(t))
            .max_by_key(|t| t.components().count())
    }

    /// The git directory `abs` lies strictly beneath.
    fn git_dir_of(&self, abs: &Path) -> Option<&PathBuf> {
        self.allowed_under
            .iter()
            .find(|g| abs.starts_with(g) && abs != g.as_path())
    }
}

/// The gate for `trees` (the plan's writable paths), where the project's `git_dirs` are the
/// repositories git may work in and `refused` the exact paths that may not be made.
pub fn rules(trees: &[PathBuf], git_dirs: &[PathBuf], refused: &[PathBuf]) -> GateRules {
    GateRules {
        trees: trees.to_vec(),
        refused: refused.to_vec(),
        refused_names: REPOSITORY_NAMES.iter().map(OsString::from).collect(),
        allowed_under: git_dirs.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate() -> GateRules {
        rules(
            &["/home/p/proj".into(), "/home/p/.claude".into()],
            &["/home/p/proj/.git".into()],
            &[
                "/home/p/proj/.mcp.json".into(),
                "/home/p/proj/.vscode".into(),
                "/home/p/.claude/settings.json".into(),
            ],
        )
    }

    fn refused(p: &str) -> bool {
        gate().refuses(Path::new(p)).is_some()
    }

    #[test]
    fn a_repository_made_anywhere_in_the_trees_is_refused() {
        for p in [
            "/home/p/proj/sub/.git",
            "/home/p/proj/sub/.git/config",
            "/home/p/proj/sub/.git/hooks/pre-commit",
            "/home/p/proj/a/b/c/.git",
            "/home/p/proj/bare/HEAD",
            "/home/p/proj/HEAD",
            "/home/p/.claude/x/.git",
            // A case-folding directory would take these for `.git` and `HEAD`.
            "/home/p/proj/sub/.GIT",
            "/home/p/proj/bare/Head",
            // The project's git directory itself is not "beneath" it.
            "/home/p/proj/.git",
        ] {
            let r = gate().refuses(Path::new(p));
            assert_eq!(r, Some(Refusal::Repository { path: p.into() }), "{p}");
        }
    }

    #[test]
    fn git_works_in_the_projects_own_git_directory() {
        for p in [
            "/home/p/proj/.git/HEAD",
            "/home/p/proj/.git/HEAD.lock",
            "/home/p/proj/.git/logs/HEAD",
            "/home/p/proj/.git/refs/remotes/origin/HEAD",
            "/home/p/proj/.git/logs/refs/remotes/origin/HEAD",
            "/home/p/proj/.git/refs/heads/feature/x",
            "/home/p/proj/.git/refs/stash",
            "/home/p/proj/.git/objects/ab/cdef",
            "/home/p/proj/.git/objects/pack/pack-1.idx",
            "/home/p/proj/.git/ORIG_HEAD",
            "/home/p/proj/.git/FETCH_HEAD",
            "/home/p/proj/.git/index.lock",
            "/home/p/proj/.git/rebase-merge/head-name",
        ] {
            assert!(!refused(p), "{p}");
        }
    }

    #[test]
    fn a_repository_dressed_inside_the_git_directory_is_refused() {
        for p in [
            "/home/p/proj/.git/logs/objects",
            "/home/p/proj/.git/logs/commondir",
            "/home/p/proj/.git/x/HEAD",
            "/home/p/proj/.git/refs/x/objects",
            "/home/p/proj/.git/objects/ab/HEAD",
            "/home/p/proj/.git/x/refs",
            "/home/p/proj/.git/x/.git",
            "/home/p/proj/.git/worktrees/w/HEAD",
            "/home/p/proj/.git/modules/sub/HEAD",
        ] {
            assert!(refused(p), "{p}");
        }
    }

    #[test]
    fn nothing_is_moved_into_or_out_of_the_git_directory() {
        let g = gate();
        let mv = |a: &str, b: &str| g.refuses_move(Path::new(a), Path::new(b));
        // Git's own renames stay inside it.
        assert_eq!(
            mv("/home/p/proj/.git/HEAD.lock", "/home/p/proj/.git/HEAD"),
            None
        );
        assert_eq!(
            mv("/home/p/proj/.git/config.lock", "/home/p/proj/.git/config"),
            None
        );
        assert_eq!(mv("/home/p/proj/a.tmp", "/home/p/proj/a"), None);
        // A directory that holds HEAD carried out, or a prepared one carried in.
        let out = mv("/home/p/proj/.git/logs", "/home/p/proj/x");
        assert_eq!(
            out,
            Some(Refusal::Repository {
                path: "/home/p/proj/x".into()
            })
        );
        assert!(mv("/home/p/proj/x", "/home/p/proj/.git/refs/x").is_some());
        // The new name, and the old, are judged as any creation.
        assert!(mv("/home/p/proj/prep", "/home/p/proj/sub/.git").is_some());
        assert!(mv("/home/p/proj/.mcp.json", "/home/p/proj/old.json").is_some());
        // Outside the trees, nothing is judged.
        assert_eq!(mv("/home/p/proj/.git/x", "/tmp/y"), None);
    }

    #[test]
    fn ordinary_work_and_everything_outside_the_trees_is_never_refused() {
        for p in [
            "/home/p/proj/src/main.rs",
            "/home/p/proj/.gitignore",
            "/home/p/proj/.github/workflows/ci.yml",
            "/home/p/proj/HEADER",
            "/home/p/proj/sub/git",
            "/home/p/proj/.mcp.json.bak",
            "/home/p/proj",
            "/tmp/clone/.git",
            "/tmp/clone/.git/config",
            "/home/p/.bashrc/.git",
            "/home/p/projx/.git",
        ] {
            assert!(!refused(p), "{p}");
        }
    }

    #[test]
    fn protected_paths_and_what_is_beneath_them_are_refused() {
        let r = gate().refuses(Path::new("/home/p/proj/.vscode/tasks.json"));
        assert_eq!(
            r,
            Some(Refusal::Protected {
                path: "/home/p/proj/.vscode/tasks.json".into(),
                protected: "/home/p/proj/.vscode".into(),
            })
        );
        assert!(refused("/home/p/proj/.mcp.json"));
        assert!(refused("/home/p/.claude/settings.json"));
        assert!(!refused("/home/p/.claude/settings.local.json.tmp"));
    }

    #[test]
    fn a_refusal_names_the_path_and_what_to_do_in_one_line() {
        let r = gate().refuses(Path::new("/home/p/proj/sub/.git")).unwrap();
        let line = r.to_string();
        assert!(line.starts_with("vault run: refused creating /home/p/proj/sub/.git: "));
        assert!(line.contains("clone or init it outside") && line.contains("/tmp"));
        assert!(!line.contains('\n'));
        assert_eq!(r.path(), Path::new("/home/p/proj/sub/.git"));
        let p = gate().refuses(Path::new("/home/p/proj/.mcp.json")).unwrap();
        assert!(p.to_string().contains("create it yourself outside"), "{p}");
        assert_eq!(r.errno(), libc::EACCES);
        let m = Refusal::Metadata {
            path: "/home/p/proj/.git".into(),
            what: "the mode",
        };
        let line = m.to_string();
        assert!(line.starts_with("vault run: refused changing the mode of /home/p/proj/.git: "));
        assert!(line.contains("change it yourself outside `vault run`") && !line.contains('\n'));
        assert_eq!(
            (m.errno(), m.path()),
            (libc::EPERM, Path::new("/home/p/proj/.git"))
        );
    }

    #[test]
    fn the_rules_refuse_the_repository_names_and_allow_the_git_dirs() {
        let g = gate();
        assert_eq!(g.refused_names, [OsString::from(".git"), "HEAD".into()]);
        assert_eq!(g.allowed_under, [PathBuf::from("/home/p/proj/.git")]);
        assert_eq!(g.trees.len(), 2);
        // No tree: nothing is refused.
        assert_eq!(GateRules::default().refuses(Path::new("/x/.git")), None);
    }
}
