//! SSH commands: refused with control characters, and checked against the credential's command
//! allowlist (if any) before anything is queued; the host, port, user and pinned host key come
//! from the credential, never the agent. The remote side runs the command through the user's
//! shell, so a pattern's `*` and `?` never match shell syntax that chains, substitutes or
//! redirects (`git pull *` does not admit `git pull; curl … | sh`); `shell_syntax` names what a
//! command contains, for the approval card.
use super::PolicyError;
use crate::credentials::SshTarget;
use serde::Deserialize;

/// Longest command accepted.
pub(super) const MAX_COMMAND_BYTES: usize = 16 * 1024;

/// `ssh_exec` arguments as the agent sent them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SshArgs {
    pub credential: String,
    pub command: String,
    pub timeout_s: Option<u64>,
    pub max_output_bytes: Option<u64>,
    pub idempotency_key: Option<String>,
    pub wait_s: Option<u64>,
}

/// A validated SSH command bound to the credential's host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshRequest {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub host_key: String,
    pub command: String,
    pub timeout_s: u64,
    pub max_output_bytes: u64,
}

pub(super) fn validate(t: &SshTarget, a: SshArgs) -> Result<SshRequest, PolicyError> {
    if a.command.trim().is_empty() {
        return Err(PolicyError::invalid(
            "command",
            "the command is empty",
            "pass the shell command to run",
        ));
    }
    if a.command.len() > MAX_COMMAND_BYTES || a.command.contains('\0') {
        return Err(PolicyError::invalid(
            "command",
            format!("the command is over {MAX_COMMAND_BYTES} bytes or contains NUL"),
            "send a shorter command",
        ));
    }
    if let Some(c) = a.command.chars().find(|c| c.is_control()) {
        return Err(PolicyError::invalid(
            "command",
            format!(
                "the command contains the control character U+{:04X} (a line break, tab or escape)",
                c as u32
            ),
            "send one command on one line, with spaces instead of tabs; run several commands as separate calls",
        ));
    }
    if !t.allow_commands.is_empty() && !t.allow_commands.iter().any(|p| glob_match(p, &a.command)) {
        return Err(PolicyError::denied(
            format!("the command is not allowed by this credential (allowed: {})", t.allow_commands.join(" | ")),
            "run a command matching one of the allowed patterns, or ask the person to edit the credential",
        ));
    }
    let (timeout_s, max_output_bytes) = super::limits(a.timeout_s, a.max_output_bytes)?;
    Ok(SshRequest {
        host: t.host.clone(),
        port: t.port,
        user: t.user.clone(),
        host_key: t.host_key.clone(),
        command: a.command,
        timeout_s,
        max_output_bytes,
    })
}

/// Whole-string glob: `*` is any run of characters, `?` one character, all else literal. A
/// wildcard never matches shell syntax (`;`, `&`, `|`, `` ` ``, `<`, `>`, `$(`, a line break),
/// so what a pattern admits stays one command with arguments; such syntax matches only where
/// the pattern itself spells it.
pub(super) fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let wild_ok = |j: usize| !is_shell_syntax(&t, j);
    // reach[j]: the pattern so far can match exactly t[..j].
    let mut reach = vec![false; t.len() + 1];
    reach[0] = true;
    for &pc in &p {
        let mut next = vec![false; t.len() + 1];
        match pc {
            '*' => {
                let mut open = false;
                for j in 0..=t.len() {
                    open = reach[j] || (open && j > 0 && wild_ok(j - 1));
                    next[j] = open;
                }
            }
            '?' => {
                for j in 1..=t.len() {
                    next[j] = reach[j - 1] && wild_ok(j - 1);
                }
            }
            lit => {
                for j in 1..=t.len() {
                    next[j] = reach[j - 1] && t[j - 1] == lit;
                }
            }
        }
        reach = next;
        if !reach.iter().any(|&r| r) {
            return false;
        }
    }
    reach[t.len()]
}

/// Whether `t[j]` is (part of) shell syntax a wildcard must not match.
fn is_shell_syntax(t: &[char], j: usize) -> bool {
    match t[j] {
        ';' | '&' | '|' | '`' | '<' | '>' | '\n' | '\r' => true,
        '$' => t.get(j + 1) == Some(&'('),
        '(' => j > 0 && t[j - 1] == '$',
        _ => false,
    }
}

/// The shell syntax a command contains, named for a person reading an approval card: the remote
/// side runs the string through the user's shell, so these change what "one command" means.
pub fn shell_syntax(cmd: &str) -> Vec<&'static str> {
    let has = |s: &str| cmd.contains(s);
    let stripped = cmd.replace("&&", "").replace("||", "");
    let mut out = Vec::new();
    for (found, name) in [
        (has(";"), "`;` runs a second command"),
        (
            has("&&"),
            "`&&` runs a second command if the first succeeds",
        ),
        (has("||"), "`||` runs a second command if the first fails"),
        (
            stripped.contains('|'),
            "`|` pipes output into another command",
        ),
        (
            stripped.contains('&'),
            "`&` runs a command in the background",
        ),
        (
            has("$("),
            "`$(…)` runs a command and substitutes its output",
        ),
        (
            has("`"),
            "backticks run a command and substitute its output",
        ),
        (has(">"), "`>` writes output to a file"),
        (has("<"), "`<` reads input from a file"),
        (has("$") && !has("$("), "`$` expands a variable"),
        (
            cmd.contains(['*', '?', '[']),
            "`*`, `?` or `[` expand to file names",
        ),
        (
            cmd.contains(['\'', '"', '\\']),
            "quotes or backslashes change how words split",
        ),
        (
            cmd.contains(['(', '{']) && !has("$("),
            "`(` or `{` groups commands",
        ),
    ] {
        if found {
            out.push(name);
        }
    }
    out
}

#[cfg(test)]
mod tests;
