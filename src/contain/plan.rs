//! What `vault run`'s sandbox shows the client, decided before anything is mounted, from the
//! person's home, the project, the vault, the client and the flags (docs/design.md §8, SECURITY.md
//! "Containment"). Deny by default: the view holds the system's directories (read-only), the
//! client's own installation (read-only), the project, the client's own state, and what the person
//! names; everything else of the person's, their home first, is absent, replaced by an empty
//! private tmpfs. Inside what is writable, what runs later outside is read-only (`guard.rs`).
//! Pure: no mount, no file written, so it is tested on its own.
use super::clients::{self, ClientFacts};
use super::gate::GateRules;
use super::guard;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The system's directories, shown read-only where they exist (a link among them, such as a
/// merged `/usr`'s `/bin`, is made again as the same link).
pub const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys", "/nix",
    "/snap",
];

/// Files and directories under the home that hold other secrets: hidden inside any shown path
/// that holds them (`--allow-read ~`) unless `--allow-read` names one itself.
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
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".config/vault-passphrase",
];

/// The person's configuration a client's tools read but never change: shown read-only (git's
/// identity, so that a commit works inside).
pub const READ_CONFIG: &[&str] = &[
    ".gitconfig",
    ".config/git/config",
    ".config/git/ignore",
    ".config/git/attributes",
];

/// The environment that leads to the person's terminal, desktop and agents, or names a
/// directory that is not in the view: removed.
pub const DROPPED_ENV: &[&str] = &[
    "TMUX",
    "TMUX_PANE",
    "TMUX_TMPDIR",
    "TMPDIR",
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
    /// The client as found on `PATH` (its link, if it is one).
    pub program: PathBuf,
    pub allow_write: Vec<PathBuf>,
    pub allow_read: Vec<PathBuf>,
    /// `--pass-env`: variables passed although their names look secret.
    pub pass_env: Vec<String>,
    pub env: Vec<(OsString, OsString)>,
}

/// One of the person's paths, shown at the same place inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub path: PathBuf,
    pub writable: bool,
}

/// The sandbox, as paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The system's directories, read-only.
    pub system: Vec<PathBuf>,
    /// Symbolic links made again inside (path, what it points to).
    pub links: Vec<(PathBuf, PathBuf)>,
    /// Empty private tmpfs mounts, writable, gone with the run: `/tmp`, `/var/tmp`, `/run`, the
    /// runtime directory, the home.
    pub private: Vec<PathBuf>,
    /// The person's paths in the view: the project, the client's state, its installation, what
    /// the flags name.
    pub shown: Vec<Shown>,
    /// Inside a writable path, yet read-only: what runs later outside.
    pub read_only: Vec<PathBuf>,
    /// Inside a writable path, bound onto itself so it cannot be renamed or removed (each
    /// repository's `.git`).
    pub pinned: Vec<PathBuf>,
    /// Inside a writable path, not there now, and not to be created from inside (the gate).
    pub must_not_create: Vec<PathBuf>,
    /// Whose mode, owner, times and extended attributes (ACLs) do not change from inside (the
    /// gate, by device and inode): each writable root, each pinned git directory, and the
    /// directory that holds each name the view protects in a writable path. Made loose (`chmod
    /// 777`, an ACL), any of them would let another user rename what it holds away once the run
    /// is over and put their own in its place, for the person's git or editor to run.
    pub kept: Vec<PathBuf>,
    /// Inside a shown path, replaced by an empty read-only directory or file.
    pub hidden_dirs: Vec<PathBuf>,
    pub hidden_files: Vec<PathBuf>,
    /// Config files of the client's, copied into the private home (its changes are not kept).
    pub copies: Vec<PathBuf>,
    /// Files of the client's state made (empty) before the run, so that they can be bound
    /// read-only (what runs later, where it was missing): (path, content).
    pub placeholders: Vec<(PathBuf, &'static str)>,
    /// The client's environment.
    pub env: Vec<(OsString, OsString)>,
    /// The client, if `vault run` knows it.
    pub client: Option<&'static ClientFacts>,
    /// What may not be created in the writable paths (`gate.rs`, enforced by PID 1): a
    /// repository anywhere, and `must_not_create`.
    pub gate: GateRules,
}

/// Why a plan cannot be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("writable {given} would let the client create {missing}, which runs later outside the sandbox; run in (or allow) a narrower directory, such as a project folder")]
    WouldCreate { given: String, missing: String },
    #[error("--allow-write {0} would make the vault or its directory writable from inside; allow a narrower directory")]
    VaultInside(String),
    #[error("{0}")]
    Guard(String),
}

fn is_under(p: &Path, root: &Path) -> bool {
    p.starts_with(root)
}

impl Plan {
    /// The sandbox for `spec`.
    pub fn new(spec: &Spec) -> Result<Self, PlanError> {
        let home = &spec.home;
        for w in &spec.allow_write {
            if is_under(&spec.vault_dir, w) || is_under(w, &spec.vault_dir) {
                return Err(PlanError::VaultInside(w.display().to_string()));
            }
        }
        let client = clients::known(&spec.program);
        let mut plan = Plan {
            client,
            ..Plan::default()
        };
        for s in SYSTEM.iter().map(Path::new) {
            match std::fs::symlink_metadata(s) {
                Ok(m) if m.is_symlink() => {
                    if let Ok(to) = std::fs::read_link(s) {
                        plan.links.push((s.to_owned(), to));
                    }
                }
                Ok(m) if m.is_dir() => plan.system.push(s.to_owned()),
                _ => {}
            }
        }
        plan.private = ["/tmp", "/var/tmp", "/run"].map(PathBuf::from).to_vec();
        plan.private.extend(spec.runtime_dir.iter().cloned());
        plan.private.push(home.clone());
        plan.private.sort_by_key(|p| p.components().count());
        plan.private.dedup();

        let mut writable: Vec<PathBuf> = vec![spec.project.clone()];
        if let Some(c) = client {
            writable.extend(c.state.iter().map(|p| home.join(p)));
        }
        writable.extend(spec.allow_write.iter().cloned());
        let mut read: Vec<PathBuf> = spec.allow_read.clone();
        read.extend(READ_CONFIG.iter().map(|p| home.join(p)));
        let (install, links) = guard::installation(&spec.program, home, &spec.env);
        read.extend(install);
        read.push(spec.vault_exe.clone());
        let vault_links = guard::links_to(&spec.vault_exe, &["vault", "agent-vault"], &spec.env);
        plan.links.extend(links.into_iter().chain(vault_links));
        if let Ok(to) = std::fs::canonicalize("/etc/resolv.conf") {
            read.push(to);
        }
        plan.show(writable, read);

        // Secrets inside what is shown (`--allow-read ~`), unless named themselves.
        let opened: BTreeSet<&PathBuf> = spec.allow_read.iter().collect();
        let inside_shown = |p: &PathBuf| plan.shown.iter().any(|s| is_under(p, &s.path));
        plan.hidden_dirs = SECRET_DIRS
            .iter()
            .map(|p| home.join(p))
            .filter(|p| !opened.contains(p) && inside_shown(p) && p.is_dir())
            .collect();
        plan.hidden_files = SECRET_FILES
            .iter()
            .map(|p| home.join(p))
            .filter(|p| !opened.contains(p) && inside_shown(p) && p.is_file())
            .collect();

        let writable: Vec<PathBuf> = plan
            .shown
            .iter()
            .filter(|s| s.writable)
            .map(|s| s.path.clone())
            .collect();
        let g = guard::guards(&writable, home, &spec.project, client).map_err(|e| match e {
            guard::GuardError::WouldCreate { given, missing } => PlanError::WouldCreate {
                given: given.display().to_string(),
                missing: missing.display().to_string(),
            },
            guard::GuardError::Search(why) => PlanError::Guard(why),
        })?;
        plan.kept = kept(&writable, &g);
        plan.read_only.extend(g.read_only);
        plan.read_only.sort_by_key(|p| p.components().count());
        plan.read_only.dedup();
        plan.gate = super::gate::rules(&writable, &g.git_dirs, &g.must_not_create);
        plan.pinned = g.pinned;
        plan.must_not_create = g.must_not_create;
        plan.placeholders = g.placeholders;
        plan.env = environment(spec, client);
        if let Some(c) = client {
            plan.copies = c
                .private_copies
                .iter()
                .map(|p| home.join(p))
                .filter(|p| p.is_file())
                .collect();
        }
        Ok(plan)
    }

    /// Adds the paths to show, writable ones first: a path already visible (inside the system's
    /// directories, or inside a shown path of the same kind) is not shown again; a read-only
    /// path inside a writable one is guarded instead. Missing paths are not shown.
    fn show(&mut self, writable: Vec<PathBuf>, read: Vec<PathBuf>) {
        let mut shown: Vec<Shown> = Vec::new();
        let in_system = |p: &Path| {
            SYSTEM
                .iter()
                .any(|s| is_under(p, Path::new(s)) && Path::new(s).is_dir())
        };
        for (path, w) in writable
            .into_iter()
            .map(|p| (p, true))
            .chain(read.into_iter().map(|p| (p, false)))
        {
            if !path.exists() && !w {
                continue;
            }
            if shown
                .iter()
                .any(|s| is_under(&path, &s.path) && s.writable == w)
            {
                continue;
            }
            if !w && in_system(&path) {
                continue;
            }
            if !w && shown.iter().any(|s| s.writable && is_under(&path, &s.path)) {
                self.read_only.push(path);
                continue;
            }
            shown.push(Shown { path, writable: w });
        }
        // Parents before children (a child is bound inside its parent's bind or tmpfs).
        shown.sort_by_key(|s| s.path.components().count());
        self.shown = shown;
    }

    /// Everything writable inside: the shown writable paths and the private tmpfs mounts.
    pub fn writable(&self) -> impl Iterator<Item = &PathBuf> {
        self.shown
            .iter()
            .filter(|s| s.writable)
            .map(|s| &s.path)
            .chain(&self.private)
    }

    /// Directories the caller creates (as the person, before the sandbox) so that they can be
    /// shown or bound inside: the client's state directories, a missing `.git/hooks`, and the
    /// placeholders of what runs later in the client's state.
    pub fn to_create(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self
            .shown
            .iter()
            .filter(|s| s.writable && !s.path.exists())
            .map(|s| s.path.clone())
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

/// What the metadata gate keeps as it is (`Plan::kept`), given the writable roots and the guards.
fn kept(writable: &[PathBuf], g: &guard::Guards) -> Vec<PathBuf> {
    let in_tree = |p: &Path| writable.iter().any(|w| p.starts_with(w));
    let holders = g
        .pinned
        .iter()
        .chain(&g.read_only)
        .chain(&g.must_not_create)
        .filter_map(|p| p.parent())
        .filter(|d| in_tree(d) && d.is_dir())
        .map(Path::to_owned);
    let mut out: Vec<PathBuf> = writable
        .iter()
        .chain(&g.pinned)
        .cloned()
        .chain(holders)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The client's environment: the person's, less what leads to their terminal and desktop and
/// every variable whose name looks secret (other tools' tokens), but the client's own model key
/// and what `--pass-env` names; plus what the client is told inside.
fn environment(spec: &Spec, client: Option<&ClientFacts>) -> Vec<(OsString, OsString)> {
    let dropped: BTreeSet<&str> = DROPPED_ENV.iter().copied().collect();
    let kept = |k: &str| {
        spec.pass_env.iter().any(|p| p == k) || client.is_some_and(|c| c.model_keys.contains(&k))
    };
    let mut env: Vec<(OsString, OsString)> = spec
        .env
        .iter()
        .filter(|(k, _)| match k.to_str() {
            Some(k) => {
                kept(k)
                    || (!dropped.contains(k)
                        && (!clients::secret_like(k) || crate::mutation::off("env_filter")))
            }
            None => false,
        })
        .cloned()
        .collect();
    if let Some(c) = client {
        for (k, v) in c.env {
            env.retain(|(have, _)| have != k);
            env.push(((*k).into(), (*v).into()));
        }
    }
    env
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
