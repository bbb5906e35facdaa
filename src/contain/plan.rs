//! What `vault run`'s sandbox lets the client see and change, decided before anything is
//! mounted, from the person's home, the project, the vault and the flags (docs/design.md §8,
//! SECURITY.md "Containment"). Pure: no mount, no file written, so it is tested on its own.
use super::gate::GateRules;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Files and directories under the home that hold other secrets: hidden unless `--allow-read`
/// opens one (`vault scan` names the same list).
pub const SECRET_DIRS: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".config/gh",
    ".config/hub",
    ".docker",
    ".kube",
    ".password-store",
    ".config/gcloud",
    ".azure",
    ".local/share/keyrings",
];
pub const SECRET_FILES: &[&str] = &[
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".my.cnf",
    ".vault-token",
    ".config/git/credentials",
];

/// What runs later, outside anything, and so is never writable from inside: shell start-up
/// files, autostart entries, user units, the person's own programs.
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
    ".config/fish",
    ".config/autostart",
    ".config/systemd",
    ".config/environment.d",
    ".local/bin",
    ".local/share/systemd",
    ".xprofile",
    ".xsessionrc",
];

/// The AI clients' own state, writable so they work as usual.
pub const CLIENT_STATE: &[&str] = &[
    ".claude",
    ".claude.json",
    ".gemini",
    ".codex",
    ".cache",
    ".npm",
    ".local/share/claude",
    ".local/state/claude",
];

/// The environment that leads to the person's terminal, desktop and agents: removed.
pub const DROPPED_ENV: &[&str] = &[
    "TMUX",
    "TMUX_PANE",
    "STY",
    "WINDOW",
    "DISPLAY",
    "XAUTHORITY",
    "WINDOWID",
    "WAYLAND_DISPLAY",
    "DBUS_SESSION_BUS_ADDRESS",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "GNOME_KEYRING_CONTROL",
    "VAULT_PASSPHRASE_FILE",
];

/// What the person gave `vault run`, and what it found.
#[derive(Debug, Clone)]
pub struct Spec {
    pub home: PathBuf,
    /// The working directory or `--project`, canonical.
    pub project: PathBuf,
    pub vault_dir: PathBuf,
    /// This binary, canonical.
    pub vault_exe: PathBuf,
    pub runtime_dir: Option<PathBuf>,
    /// Where the person's own sockets live besides the runtime directory: the agent's socket
    /// directory, `$TMPDIR`, `$TMUX_TMPDIR`, `/run/user/UID` (each made private if it exists).
    pub socket_dirs: Vec<PathBuf>,
    pub allow_write: Vec<PathBuf>,
    pub allow_read: Vec<PathBuf>,
    pub env: Vec<(OsString, OsString)>,
}

/// The sandbox, as paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Writable (and readable): the project, the client's state, `--allow-write`.
    pub writable: Vec<PathBuf>,
    /// Each gets an empty tmpfs of its own, private to the run (writable inside it).
    pub private: Vec<PathBuf>,
    /// Replaced by an empty, read-only directory or file.
    pub hidden_dirs: Vec<PathBuf>,
    pub hidden_files: Vec<PathBuf>,
    /// Inside a writable path, yet read-only: what runs later outside (`.git/hooks`, …).
    pub read_only: Vec<PathBuf>,
    /// The client's environment.
    pub env: Vec<(OsString, OsString)>,
    /// What may not be created in the writable paths (`gate.rs`, enforced by PID 1).
    pub gate: GateRules,
}

/// Why a plan cannot be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("writable {given} would let the client create {missing}, which runs later outside the sandbox; run in (or allow) a narrower directory, such as a project folder")]
    WouldCreate { given: String, missing: String },
    #[error("--allow-write {0} would make the vault or its directory writable from inside; allow a narrower directory")]
    VaultInside(String),
}

fn is_under(p: &Path, root: &Path) -> bool {
    p.starts_with(root)
}

/// The project's git directories: `.git`, or where a `.git` file (a worktree or submodule)
/// leads, and that directory's common directory.
pub fn git_dirs(project: &Path) -> Vec<PathBuf> {
    let dot = project.join(".git");
    let mut dirs = Vec::new();
    if dot.is_dir() {
        dirs.push(dot);
    } else if let Ok(text) = std::fs::read_to_string(&dot) {
        if let Some(g) = text.trim().strip_prefix("gitdir:") {
            let g = project.join(g.trim());
            if let Ok(common) = std::fs::read_to_string(g.join("commondir")) {
                dirs.push(g.join(common.trim()));
            }
            dirs.push(g);
        }
    }
    dirs
}

/// The project's git files that run later (`hooks/`, `config`) in each of its `git_dirs`.
pub fn git_guarded(project: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in git_dirs(project) {
        out.push(d.join("hooks"));
        out.push(d.join("config"));
    }
    out
}

impl Plan {
    /// The sandbox for `spec`. Missing client state directories are left to the caller to
    /// create (`Plan::to_create`); a `--allow-write` that would let the client create a file
    /// that runs later, or reach the vault, is refused.
    pub fn new(spec: &Spec) -> Result<Self, PlanError> {
        let home = &spec.home;
        let mut writable: Vec<PathBuf> = vec![spec.project.clone()];
        writable.extend(CLIENT_STATE.iter().map(|p| home.join(p)));
        writable.extend(spec.allow_write.iter().cloned());
        let opened: BTreeSet<&PathBuf> = spec.allow_read.iter().collect();
        let hidden_dirs: Vec<PathBuf> = SECRET_DIRS
            .iter()
            .map(|p| home.join(p))
            .chain([spec.vault_dir.clone()])
            .filter(|p| !opened.contains(p) && p.is_dir())
            .collect();
        let hidden_files: Vec<PathBuf> = SECRET_FILES
            .iter()
            .map(|p| home.join(p))
            .filter(|p| !opened.contains(p) && p.is_file())
            .collect();
        let exe_dir = spec
            .vault_exe
            .parent()
            .map(Path::to_owned)
            .unwrap_or_default();
        for w in &spec.allow_write {
            if is_under(&spec.vault_dir, w) || is_under(w, &spec.vault_dir) {
                return Err(PlanError::VaultInside(w.display().to_string()));
            }
        }
        // What must stay read-only, wherever a writable path holds it.
        let mut guarded: Vec<PathBuf> = NEVER_WRITABLE.iter().map(|p| home.join(p)).collect();
        guarded.push(exe_dir);
        guarded.extend(git_guarded(&spec.project));
        let mut read_only = Vec::new();
        for g in guarded {
            let Some(root) = writable.iter().find(|w| is_under(&g, w)) else {
                continue;
            };
            if g.exists() || g.ends_with("hooks") {
                read_only.push(g);
            } else {
                // Not there, so nothing to bind read-only over: the client could create it.
                return Err(PlanError::WouldCreate {
                    given: root.display().to_string(),
                    missing: g.display().to_string(),
                });
            }
        }
        let mut private: Vec<PathBuf> = vec!["/tmp".into(), "/var/tmp".into()];
        private.extend(spec.runtime_dir.iter().cloned());
        private.extend(spec.socket_dirs.iter().cloned());
        private.push("/run/screen".into());
        private.retain(|p| p.is_dir());
        // Parents before children (a child is then made again inside its parent's tmpfs).
        private.sort_by_key(|p| p.components().count());
        private.dedup();
        let dropped: BTreeSet<&str> = DROPPED_ENV.iter().copied().collect();
        let env = spec
            .env
            .iter()
            .filter(|(k, _)| !k.to_str().is_some_and(|k| dropped.contains(k)))
            .cloned()
            .collect();
        writable.dedup();
        let gate = super::gate::rules(&writable, &git_dirs(&spec.project), &[]);
        Ok(Self {
            gate,
            writable,
            private,
            hidden_dirs,
            hidden_files,
            read_only,
            env,
        })
    }

    /// Directories the caller creates (as the person, before the sandbox) so that they can be
    /// writable or read-only inside: the clients' state directories, and a missing `.git/hooks`.
    pub fn to_create(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self
            .writable
            .iter()
            .filter(|p| !p.exists() && p.extension().is_none())
            .cloned()
            .collect();
        out.extend(
            self.read_only
                .iter()
                .filter(|p| {
                    p.ends_with("hooks") && !p.exists() && p.parent().is_some_and(Path::is_dir)
                })
                .cloned(),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(root: &Path) -> Spec {
        Spec {
            home: root.join("home"),
            project: root.join("home/proj"),
            vault_dir: root.join("home/.local/share/agent-vault"),
            vault_exe: root.join("home/.local/bin/vault"),
            runtime_dir: None,
            socket_dirs: Vec::new(),
            allow_write: Vec::new(),
            allow_read: Vec::new(),
            env: vec![
                ("PATH".into(), "/usr/bin".into()),
                ("TMUX".into(), "/tmp/tmux-1/default,1,0".into()),
                ("SSH_AUTH_SOCK".into(), "/tmp/ssh-x/agent.1".into()),
                ("DISPLAY".into(), ":0".into()),
            ],
        }
    }

    fn tree(tag: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("av-plan-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for d in [
            "home/proj/.git",
            "home/.ssh",
            "home/.aws",
            "home/.local/share/agent-vault",
            "home/.local/bin",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in ["home/.netrc", "home/.bashrc", "home/proj/.git/config"] {
            std::fs::write(root.join(f), "x").unwrap();
        }
        root
    }

    #[test]
    fn the_plan_hides_secrets_guards_what_runs_later_and_drops_the_ways_out() {
        let root = tree("basic");
        let p = Plan::new(&spec(&root)).unwrap();
        let home = root.join("home");
        assert_eq!(p.writable[0], home.join("proj"));
        assert!(p.writable.contains(&home.join(".claude")));
        for d in [".ssh", ".aws", ".local/share/agent-vault"] {
            assert!(p.hidden_dirs.contains(&home.join(d)), "{d}: {p:?}");
        }
        assert!(p.hidden_files.contains(&home.join(".netrc")));
        // The project's hooks and config stay read-only; hooks is made to exist first.
        assert!(p.read_only.contains(&home.join("proj/.git/config")));
        assert!(p.read_only.contains(&home.join("proj/.git/hooks")));
        assert!(p.to_create().contains(&home.join("proj/.git/hooks")));
        // The gate: the writable paths, where only the project's git directory may hold HEAD.
        assert_eq!(p.gate.trees, p.writable);
        assert_eq!(p.gate.allowed_under, [home.join("proj/.git")]);
        // The home itself is not writable, so its rc files need no guard of their own.
        assert!(!p.read_only.contains(&home.join(".bashrc")));
        let names: Vec<&str> = p.env.iter().map(|(k, _)| k.to_str().unwrap()).collect();
        assert_eq!(names, ["PATH"]);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn allowing_the_home_guards_its_rc_files_and_refuses_to_let_new_ones_be_made() {
        let root = tree("home");
        let mut s = spec(&root);
        let home = root.join("home");
        s.allow_write = vec![home.clone()];
        // ~/.zshrc does not exist: writable home would let the client create it.
        let e = Plan::new(&s).unwrap_err();
        assert!(matches!(e, PlanError::VaultInside(_)), "{e}");
        s.vault_dir = root.join("elsewhere");
        let e = Plan::new(&s).unwrap_err();
        assert!(matches!(e, PlanError::WouldCreate { .. }), "{e}");
        // A narrower directory is fine, and `--allow-read` opens a hidden one.
        s.allow_write = vec![home.join("notes")];
        s.allow_read = vec![home.join(".aws")];
        let p = Plan::new(&s).unwrap();
        assert!(!p.hidden_dirs.contains(&home.join(".aws")));
        assert!(p.hidden_dirs.contains(&home.join(".ssh")));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_project_that_is_the_home_is_refused() {
        let root = tree("homeproj");
        let mut s = spec(&root);
        s.project = root.join("home");
        s.vault_dir = root.join("elsewhere");
        let e = Plan::new(&s).unwrap_err();
        assert!(matches!(e, PlanError::WouldCreate { .. }), "{e}");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_worktree_guards_its_git_dir_and_the_common_one() {
        let root = tree("wt");
        let common = root.join("main/.git");
        std::fs::create_dir_all(common.join("worktrees/w")).unwrap();
        std::fs::write(common.join("worktrees/w/commondir"), "../..\n").unwrap();
        let w = root.join("w");
        std::fs::create_dir_all(&w).unwrap();
        std::fs::write(
            w.join(".git"),
            format!("gitdir: {}\n", common.join("worktrees/w").display()),
        )
        .unwrap();
        let g = git_guarded(&w);
        assert!(
            g.contains(&common.join("worktrees/w/../..").join("hooks")),
            "{g:?}"
        );
        assert!(g.contains(&common.join("worktrees/w/config")), "{g:?}");
        std::fs::remove_dir_all(root).unwrap();
    }
}
