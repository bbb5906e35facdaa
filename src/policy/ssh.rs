//! SSH commands: checked against the credential's command allowlist (if any) before anything is
//! queued; the host, port, user and pinned host key come from the credential, never the agent.
use super::{bounded, PolicyError, TIMEOUT_S};
use crate::credentials::SshTarget;
use serde::Deserialize;

/// Longest command accepted.
pub const MAX_COMMAND_BYTES: usize = 16 * 1024;

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
    if !t.allow_commands.is_empty() && !t.allow_commands.iter().any(|p| glob_match(p, &a.command)) {
        return Err(PolicyError::denied(
            format!("the command is not allowed by this credential (allowed: {})", t.allow_commands.join(" | ")),
            "run a command matching one of the allowed patterns, or ask the person to edit the credential",
        ));
    }
    Ok(SshRequest {
        host: t.host.clone(),
        port: t.port,
        user: t.user.clone(),
        host_key: t.host_key.clone(),
        command: a.command,
        timeout_s: bounded("timeout_s", a.timeout_s, TIMEOUT_S)?,
        max_output_bytes: bounded(
            "max_output_bytes",
            a.max_output_bytes,
            (1, 1024 * 1024, 64 * 1024),
        )?,
    })
}

/// Whole-string glob: `*` is any run of characters, `?` one character, all else literal.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}
