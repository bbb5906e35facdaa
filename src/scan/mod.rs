//! `vault scan`'s findings: the secrets an agent could still read in a project's `.env*` files
//! and in the usual credential files under the home directory, each with its path, line, kind and
//! the `vault add` command that moves it into the vault. It needs no vault, keeps no value and
//! returns none: a finding names where a secret is, never what it is. No printing here.
mod dotenv;
mod home;
mod json;
mod suggest;

use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

/// One secret found: where (1-based line), what kind, and the command that moves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub path: PathBuf,
    pub line: usize,
    pub kind: &'static str,
    pub command: String,
}

/// What a scan found, and how far it looked.
#[derive(Debug, Default)]
pub struct Report {
    pub findings: Vec<Finding>,
    /// The project walk stopped at `MAX_ENTRIES` entries; files past it were not read.
    pub truncated: bool,
}

/// Errors of a scan: only the project directory itself can fail it (an unreadable file in it
/// or under the home directory is skipped).
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("cannot scan {}: {error}; give a directory you can read", path.display())]
    Project {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("cannot scan {}: not a directory; give the project's directory", path.display())]
    NotADirectory { path: PathBuf },
}

/// Directories the project walk never enters: version control, dependencies and build output
/// (hidden directories are skipped too).
const SKIP_DIRS: &[&str] = &[
    "node_modules",
    "target",
    "vendor",
    "bower_components",
    "__pycache__",
    "venv",
];
/// How deep the project walk goes below the project directory.
const MAX_DEPTH: usize = 8;
/// How many directory entries the project walk looks at before it stops.
const MAX_ENTRIES: usize = 100_000;
/// A `.env*` file larger than this is not read.
const MAX_FILE: u64 = 1024 * 1024;

/// Scans `project` (walked for `.env*` files and a project `.npmrc`) and, when given, the usual
/// credential files under `home`.
pub fn scan(project: &Path, home: Option<&Path>) -> Result<Report, ScanError> {
    let root = std::fs::canonicalize(project).map_err(|error| ScanError::Project {
        path: project.to_owned(),
        error,
    })?;
    if !root.is_dir() {
        return Err(ScanError::NotADirectory {
            path: project.to_owned(),
        });
    }
    let mut report = Report::default();
    let mut files = Vec::new();
    walk(&root, &mut files, &mut report.truncated).map_err(|error| ScanError::Project {
        path: project.to_owned(),
        error,
    })?;
    for file in files {
        let Some(text) = read_small(&file, MAX_FILE) else {
            continue;
        };
        if file.file_name().is_some_and(|n| n == ".npmrc") {
            report.findings.extend(home::npmrc(&file, &text));
        } else {
            report.findings.extend(dotenv_findings(&file, &text));
        }
    }
    if let Some(home) = home {
        for &(rel, reader) in home::PLACES {
            let path = home.join(rel);
            if let Some(text) = read_small(&path, MAX_FILE) {
                report.findings.extend(reader(&path, &text));
            }
        }
        for path in json::gcloud_legacy(&home.join(home::GCLOUD_LEGACY)) {
            if let Some(text) = read_small(&path, MAX_FILE) {
                report.findings.extend(json::gcloud(&path, &text));
            }
        }
        report.findings.extend(home::ssh_keys(&home.join(".ssh")));
    }
    // A project inside the home directory may name a home file twice (its `.npmrc`).
    let mut seen = std::collections::BTreeSet::new();
    report
        .findings
        .retain(|f| seen.insert((f.path.clone(), f.line, f.kind)));
    Ok(report)
}

/// The findings of one dotenv file.
fn dotenv_findings(path: &Path, text: &str) -> Vec<Finding> {
    dotenv::assignments(text)
        .into_iter()
        .filter_map(|a| {
            let class = dotenv::classify(a.key, a.value)?;
            let s = match class.service {
                dotenv::Fit::Http(service) => suggest::Suggestion::Http {
                    service,
                    host: None,
                    name: Some(suggest::name_from_key(a.key)),
                    from: suggest::From::Env {
                        file: path,
                        key: a.key,
                    },
                },
                dotenv::Fit::PrivateKey => suggest::Suggestion::Advice(format!(
                    "a private key: an SSH key goes in with `vault add ssh NAME --host HOST --user USER --key-file FILE --fetch-host-key` from a file of its own (then delete that file); remove {} from this file",
                    a.key
                )),
                dotenv::Fit::UrlPassword => {
                    suggest::Suggestion::Advice(suggest::URL_PASSWORD_ADVICE.into())
                }
                dotenv::Fit::Aws => suggest::Suggestion::Advice(format!(
                    "no vault kind signs AWS requests (SigV4) yet: remove {} from this file and use short-lived credentials (`aws sso login`)",
                    a.key
                )),
            };
            Some(Finding {
                path: path.to_owned(),
                line: a.line,
                kind: class.kind,
                command: s.command(),
            })
        })
        .collect()
}

/// Whether a file name is a project file the scan reads: `.env`, `.env.local`, `.envrc`, … and
/// a project's own `.npmrc`.
fn wanted(name: &str) -> bool {
    name.starts_with(".env") || name == ".npmrc"
}

/// The wanted files under `root`, in name order, without following directory links, no deeper
/// than `MAX_DEPTH`, stopping after `MAX_ENTRIES` entries. Only `root` itself must be readable.
fn walk(root: &Path, out: &mut Vec<PathBuf>, truncated: &mut bool) -> std::io::Result<()> {
    let mut seen = 0usize;
    let mut stack = vec![(root.to_owned(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if depth == 0 => return Err(e),
            Err(_) => continue,
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        let mut subdirs = Vec::new();
        for e in entries {
            seen += 1;
            if seen > MAX_ENTRIES {
                *truncated = true;
                return Ok(());
            }
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                if depth < MAX_DEPTH && !name.starts_with('.') && !SKIP_DIRS.contains(&name) {
                    subdirs.push((e.path(), depth + 1));
                }
            } else if wanted(name) {
                // A linked `.env` is common (`.env -> ../shared.env`): read what it points to.
                if std::fs::metadata(e.path()).is_ok_and(|m| m.is_file()) {
                    out.push(e.path());
                }
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(())
}

/// A value that is really there (not empty, not a `${VAR}` reference, not `""`).
fn present(v: &str) -> bool {
    let v = v.trim().trim_matches(['"', '\'']);
    !v.is_empty() && !v.starts_with('$') && v != "null" && v != "~"
}

/// A regular file's text, if it is at most `max` bytes and UTF-8 (zeroized when dropped: it may
/// hold secrets).
fn read_small(path: &Path, max: u64) -> Option<Zeroizing<String>> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > max {
        if meta.is_file() {
            tracing::debug!(path = %path.display(), "scan: skipped, larger than {max} bytes");
        }
        return None;
    }
    let bytes = Zeroizing::new(std::fs::read(path).ok()?);
    let text = std::str::from_utf8(&bytes).ok()?;
    Some(Zeroizing::new(text.to_owned()))
}
