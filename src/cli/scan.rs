//! `vault scan [DIR] [--json] [--no-home]`: what an agent could still read — secrets in DIR's `.env*` files
//! and in the usual credential files under `$HOME` — each with its path, line, kind and the
//! `vault add` command that moves it in. Never a value. Exit 1 when anything is found (for CI
//! and pre-commit hooks), 0 when clean. Needs no vault: no passphrase, no agent, no directory.
use crate::cli::Exit;
use crate::scan::{self, Finding};
use crate::term::escape;
use serde_json::{json, Value};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The project to walk for `.env*` files (default: the working directory).
    #[arg(value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Print a JSON array of findings: {"path","line","kind","command"}.
    #[arg(long)]
    json: bool,
    /// Only DIR, not the files under $HOME (for CI and pre-commit hooks, which judge the project).
    #[arg(long)]
    no_home: bool,
}

fn finding_json(f: &Finding) -> Value {
    json!({
        "path": f.path.to_string_lossy(),
        "line": f.line,
        "kind": f.kind,
        "command": f.command,
    })
}

pub(super) fn run(args: Args) -> anyhow::Result<Exit> {
    let dir = args.dir.unwrap_or_else(|| PathBuf::from("."));
    // Named as a person reads it: the folder's own path, never "." .
    let shown = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty() && !args.no_home)
        .map(PathBuf::from);
    if home.is_none() && !args.no_home {
        tracing::warn!("HOME is not set: only {} was scanned", dir.display());
    }
    let report = scan::scan(&dir, home.as_deref())?;
    if report.truncated {
        tracing::warn!(
            "{} holds too many files: the walk stopped early; scan its subdirectories one by one",
            dir.display()
        );
    }
    let found = !report.findings.is_empty();
    if args.json {
        outln!(
            "{}",
            Value::Array(report.findings.iter().map(finding_json).collect())
        );
    } else if !found && args.no_home {
        outln!(
            "Clean: no secret an agent could read in the .env files under {}.",
            escape(&shown.to_string_lossy())
        );
    } else if !found {
        outln!(
            "Clean: no secret an agent could read in the .env files under {} or in the usual credential files under {}.",
            escape(&shown.to_string_lossy()),
            home.as_deref()
                .map_or("an unset HOME".into(), |h| escape(&h.to_string_lossy()))
        );
    } else {
        for f in &report.findings {
            outln!(
                "{}:{}: {}",
                escape(&f.path.to_string_lossy()),
                f.line,
                f.kind
            );
            outln!("    {}", escape(&f.command));
        }
        outln!("{}", summary(&report.findings));
    }
    Ok(if found { Exit::Failure } else { Exit::Ok })
}

/// The last line of a report: how many, what to fill in (only the placeholders the commands
/// hold), and what is left to do by hand (a command with `--remove-from-source` removes the line
/// itself).
fn summary(findings: &[scan::Finding]) -> String {
    let fill: Vec<&str> = ["NAME", "HOST", "USER"]
        .into_iter()
        .filter(|p| {
            findings.iter().any(|f| {
                f.command
                    .split(|c: char| !c.is_ascii_alphanumeric())
                    .any(|w| w == *p)
            })
        })
        .collect();
    let fill = match fill.as_slice() {
        [] => String::new(),
        [one] => format!(" (fill in {one})"),
        [init @ .., last] => format!(" (fill in {} and {last})", init.join(", ")),
    };
    let by_hand = findings
        .iter()
        .filter(|f| !f.command.contains("--remove-from-source"))
        .count();
    let then = if by_hand == 0 {
        "; each also removes the secret from its file".to_owned()
    } else if by_hand == findings.len() {
        ", then delete it from its file".to_owned()
    } else {
        ", then delete it from its file where the command does not (--remove-from-source does)"
            .to_owned()
    };
    format!(
        "{} secret(s) an agent could read. Move each with the command under it{fill}{then}.",
        findings.len()
    )
}
