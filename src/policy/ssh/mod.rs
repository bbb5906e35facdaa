//! SSH commands: refused with control characters, and checked against the credential's command
//! allowlist (if any) before anything is queued; the host, port, user and pinned host key come
//! from the credential, never the agent. The remote side runs the command through the user's
//! shell, so under an allowlist the command is split into shell words (`words.rs`), matched word
//! by word, and sent rebuilt from them, each word single-quoted: a wildcard admits plain words
//! only, never shell syntax or an option the pattern does not spell. Without an allowlist the
//! command is sent as written (the person approves that exact string). `shell_syntax` names what
//! a command contains, for the approval card.
use crate::credentials::words;

use super::PolicyError;
use crate::credentials::SshTarget;
use serde::Deserialize;

#[cfg(test)]
pub(super) use crate::credentials::words::glob_match;

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
    /// What is sent: as written, or under an allowlist the matched words single-quoted.
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
    let command = if t.allow_commands.is_empty() {
        a.command
    } else {
        allowed(&t.allow_commands, &a.command)?
    };
    if command.len() > MAX_COMMAND_BYTES {
        return Err(PolicyError::invalid(
            "command",
            format!("with each word quoted, as it is sent, the command is over {MAX_COMMAND_BYTES} bytes"),
            "send a shorter command",
        ));
    }
    let (timeout_s, max_output_bytes) = super::limits(a.timeout_s, a.max_output_bytes)?;
    Ok(SshRequest {
        host: t.host.clone(),
        port: t.port,
        user: t.user.clone(),
        host_key: t.host_key.clone(),
        command,
        timeout_s,
        max_output_bytes,
    })
}

/// The command as the vault sends it under an allowlist: its words single-quoted and the
/// operators the matching pattern spells; refused unless a pattern matches it word for word.
/// The sent form splits to the same words, so what is stored validates to itself at dispatch.
fn allowed(patterns: &[String], cmd: &str) -> Result<String, PolicyError> {
    let listed = patterns
        .iter()
        .map(|p| format!("`{p}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let tokens = words::split(cmd, false).map_err(|e| {
        PolicyError::denied(
            format!("the command is not allowed by this credential: {e}. Under its allowlist ({listed}) a command is plain words (letters, digits and `_-./:,+=@%`) and the operators its patterns spell"),
            "pass each argument as a plain word, with no quoting, expansion or file name pattern; if the work needs them, ask the person to edit the credential",
        )
    })?;
    let mut unusable = Vec::new();
    for p in patterns {
        match words::compile(p) {
            Ok(parts) if words::matches(&parts, &tokens) => return Ok(words::quoted(&tokens)),
            Ok(_) => {}
            Err(e) => unusable.push(format!("`{p}` ({e})")),
        }
    }
    let mut reason = format!(
        "the command is not allowed by this credential (allowed: {listed}); a wildcard matches plain words only, and never an option (a word beginning with `-`) the pattern does not spell"
    );
    if !unusable.is_empty() {
        reason.push_str(&format!(
            "; these patterns match nothing, as they are not plain words: {}",
            unusable.join(", ")
        ));
    }
    Err(PolicyError::denied(
        reason,
        "run a command that matches one of the allowed patterns word for word, or ask the person to edit the credential",
    ))
}

/// The shell syntax a command contains, named for a person reading an approval card: the remote
/// side runs the string through the user's shell, so these change what "one command" means. The
/// vault's own quoting (whole plain words in single quotes, as sent under an allowlist) means the
/// bare words and is read without its quotes: such a command names only its operators.
pub fn shell_syntax(cmd: &str) -> Vec<&'static str> {
    let bare;
    let cmd = match words::split(cmd, false) {
        Ok(tokens) => {
            bare = words::unquoted(&tokens);
            bare.as_str()
        }
        Err(_) => cmd,
    };
    let has = |s: &str| cmd.contains(s);
    // `&&`, `||` and the redirections `>&2`, `2>&1`, `<&3`, `&>file` are not a pipe or `&`.
    let stripped = cmd
        .replace("&&", "")
        .replace("||", "")
        .replace(">&", "")
        .replace("<&", "")
        .replace("&>", "");
    // Whitespace-separated pieces, without the quoting or `$` that may hide an option's dash.
    let pieces: Vec<&str> = cmd
        .split(' ')
        .map(|w| w.trim_start_matches(['$', '\'', '"', '\\']))
        .collect();
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
        (expands_variable(cmd), "`$` expands a variable"),
        (
            has("$'") || has("$\""),
            "`$'…'` decodes escapes into the word (`\\x3b` becomes `;`) and `$\"…\"` translates it: neither is the text as written",
        ),
        (
            pieces.iter().any(|w| option_value_has_syntax(w)),
            "an option's value (`--opt=value`, `-oKey=value`) holds shell syntax: the program may run it as a command",
        ),
        (
            pieces.iter().any(|w| runs_something(w))
                || (pieces.contains(&"rsync") && pieces.iter().any(|w| w.starts_with("-e"))),
            "an option that runs a command or writes files (`--upload-pack`, `-e`/`--rsh`, `--checkpoint-action`, `--to-command`, `-exec`, `ProxyCommand`, …)",
        ),
        (
            cmd.contains(['*', '?', '[']),
            "`*`, `?` or `[` expand to file names",
        ),
        (
            cmd.contains(['\'', '"', '\\']),
            "quotes or backslashes change how words split",
        ),
        (
            cmd.contains(['(', '{']) && !has("$(") && !has("${"),
            "`(` or `{` groups commands, or `{a,b}` expands to several words",
        ),
        (has("~"), "`~` expands to a home directory"),
        (
            pieces.iter().any(|w| w.starts_with('#')),
            "`#` starts a comment: the rest of the line is not run",
        ),
    ] {
        if found {
            out.push(name);
        }
    }
    out
}

/// A `$` that is not `$(`, `$'` or `$"` (named on their own).
fn expands_variable(cmd: &str) -> bool {
    cmd.match_indices('$')
        .any(|(i, _)| !matches!(cmd[i + 1..].chars().next(), Some('(' | '\'' | '"')))
}

/// An option (`-…`) with a value after `=` that holds anything but plain characters.
fn option_value_has_syntax(piece: &str) -> bool {
    piece.starts_with('-')
        && piece
            .split_once('=')
            .is_some_and(|(_, value)| !value.chars().all(words::is_plain))
}

/// Options of git, rsync, tar, find and ssh that run a command or write files (rsync's `-e` is
/// looked for only beside `rsync`: elsewhere it means other things).
fn runs_something(piece: &str) -> bool {
    const LONG: &[&str] = &[
        "--upload-pack",
        "--receive-pack",
        "--exec",
        "--rsh",
        "--rsync-path",
        "--checkpoint-action",
        "--to-command",
        "--use-compress-program",
        "--info-script",
        "--new-volume-script",
    ];
    const FIND: &[&str] = &[
        "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls", "-delete",
    ];
    let lower = piece.to_ascii_lowercase();
    let name = piece.split('=').next().unwrap_or(piece);
    LONG.contains(&name)
        || FIND.contains(&piece)
        || ["proxycommand", "localcommand", "sshcommand"]
            .iter()
            .any(|k| lower.contains(k))
}

#[cfg(test)]
mod tests;
