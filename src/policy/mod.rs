//! Policy: turning tool arguments the MCP layer has already shape-checked into a validated,
//! normalized request bound to one credential of the session's profile, and refusing what the
//! credential's rules forbid, before anything is queued. No I/O beyond the store; no DNS.
mod http;
mod path;
pub mod scope;
mod ssh;

pub use http::{HttpArgs, HttpRequest};
pub use ssh::{shell_syntax, SshArgs, SshRequest};

use crate::credentials::{Approval, Credential, Target};
use crate::wire::{CredentialRef, NormalizedAction, NormalizedHttp, NormalizedSsh};

/// Largest request body the vault forwards for `http_request`.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Largest request body `vault run`'s proxy forwards for a tool (a `git push`'s pack): past
/// `MAX_BODY_BYTES` it reaches the agent through a file (`exec::relayed`).
pub const PROXIED_BODY_MAX_BYTES: usize = 64 * 1024 * 1024;
/// Bounds of `timeout_s`.
pub const TIMEOUT_S: (u64, u64, u64) = (1, 300, 30);
/// The largest response `vault run`'s proxy relays for a request it swapped a placeholder in
/// (up to 4 MiB in the agent's reply, past that through a file the proxy reads whole).
pub const PROXIED_MAX_BYTES: u64 = 256 * 1024 * 1024;
/// `max_output_bytes`: (least, most, default).
pub const MAX_OUTPUT_BYTES: (u64, u64, u64) = (1, 1024 * 1024, 64 * 1024);

/// Why a request was refused before anything was queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The argument is malformed (`invalid_argument`).
    #[error("{field}: {reason}")]
    Invalid {
        field: &'static str,
        reason: String,
        fix: String,
    },
    /// The credential's rules forbid it (`policy_denied`).
    #[error("{reason}")]
    Denied { reason: String, fix: String },
}

impl PolicyError {
    pub(crate) fn invalid(
        field: &'static str,
        reason: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        PolicyError::Invalid {
            field,
            reason: reason.into(),
            fix: fix.into(),
        }
    }
    pub(crate) fn denied(reason: impl Into<String>, fix: impl Into<String>) -> Self {
        PolicyError::Denied {
            reason: reason.into(),
            fix: fix.into(),
        }
    }
    pub fn code(&self) -> &'static str {
        match self {
            PolicyError::Invalid { .. } => "invalid_argument",
            PolicyError::Denied { .. } => "policy_denied",
        }
    }
    pub fn fix(&self) -> &str {
        match self {
            PolicyError::Invalid { fix, .. } | PolicyError::Denied { fix, .. } => fix,
        }
    }
}

/// A request that passed validation and the credential's rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValidatedRequest {
    Http(HttpRequest),
    Ssh(SshRequest),
}

impl ValidatedRequest {
    /// Team mode: the KV version of the OpenBao secret an HTTP request sends (covered by its
    /// hash). No effect on SSH.
    pub fn set_secret_version(&mut self, version: Option<u64>) {
        if let ValidatedRequest::Http(h) = self {
            h.secret_version = version;
        }
    }

    pub fn tool(&self) -> &'static str {
        match self {
            ValidatedRequest::Http(_) => "http_request",
            ValidatedRequest::Ssh(_) => "ssh_exec",
        }
    }
    /// What the approver reads: `POST https://api.example.com/v1/items (credential example)`.
    pub fn summary(&self, credential: &str) -> String {
        match self {
            ValidatedRequest::Http(h) => match h.secret_version {
                None => format!("{} {} (credential {credential})", h.method, h.url),
                // Team mode: the journal names the KV version the action sends.
                Some(v) => format!(
                    "{} {} (credential {credential}, OpenBao secret version {v})",
                    h.method, h.url
                ),
            },
            ValidatedRequest::Ssh(s) => {
                let host = if s.host.contains(':') {
                    format!("[{}]", s.host)
                } else {
                    s.host.clone()
                };
                format!(
                    "ssh {}@{}:{} `{}` (credential {credential})",
                    s.user, host, s.port, s.command
                )
            }
        }
    }
    /// The normalized action (docs/design.md §4); its canonical JSON is what the action hash covers.
    pub fn normalized(&self, cred: &Credential) -> NormalizedAction {
        // The name and profile too: the card shows them, so the hash must cover them.
        let credential = CredentialRef {
            id: cred.id.clone(),
            version: cred.version,
            name: cred.name.clone(),
            profile: cred.profile.clone(),
        };
        match self {
            ValidatedRequest::Http(h) => NormalizedAction::Http(NormalizedHttp {
                credential,
                method: h.method.clone(),
                url: h.url.clone(),
                headers: h.headers.clone(),
                body_blake3: h
                    .body
                    .as_ref()
                    .map(|b| blake3::hash(b).to_hex().to_string()),
                timeout_s: h.timeout_s,
                max_output_bytes: h.max_output_bytes,
                secret_version: h.secret_version,
                proxied: h.proxied,
            }),
            ValidatedRequest::Ssh(s) => NormalizedAction::Ssh(NormalizedSsh {
                credential,
                host: s.host.clone(),
                port: s.port,
                user: s.user.clone(),
                host_key: s.host_key.clone(),
                command: s.command.clone(),
                timeout_s: s.timeout_s,
                max_output_bytes: s.max_output_bytes,
            }),
        }
    }
    pub fn body(&self) -> Option<&[u8]> {
        match self {
            ValidatedRequest::Http(h) => h.body.as_deref(),
            ValidatedRequest::Ssh(_) => None,
        }
    }
}

/// blake3 hex of the canonical JSON of a normalized action.
pub fn action_hash(normalized: &NormalizedAction) -> String {
    hash_of_text(&canonical_text(normalized))
}

/// The canonical JSON text of a normalized action: what `actions.normalized` stores.
pub fn canonical_text(normalized: &NormalizedAction) -> String {
    let value = serde_json::to_value(normalized).expect("a normalized action always serializes");
    crate::canonical::to_string(&value)
}

/// The action hash of a stored normalized text, read as it is (a text that is not canonical JSON
/// of a normalized action is refused, so what is hashed is what is parsed): the action and its
/// hash.
pub fn read_normalized(text: &str) -> Option<(NormalizedAction, String)> {
    let parsed: NormalizedAction = serde_json::from_str(text).ok()?;
    (canonical_text(&parsed) == text).then(|| (parsed, hash_of_text(text)))
}

/// The action hash of a canonical normalized text.
pub fn hash_of_text(text: &str) -> String {
    blake3::hash(text.as_bytes()).to_hex().to_string()
}

/// Validates HTTP arguments against the credential (which must be an HTTP credential). A body
/// that a person could not read whole on the approval card (`term::MAX_SHOWN_BODY_BYTES` of
/// displayed text) is refused when the credential's policy may ask for a card.
pub fn validate_http(cred: &Credential, args: HttpArgs) -> Result<ValidatedRequest, PolicyError> {
    let req = match &cred.target {
        Target::Http(t) => http::validate(t, args)?,
        Target::Ssh(_) => return Err(wrong_kind(cred, "ssh", "ssh_exec")),
    };
    let may_need_card = match cred.approval {
        Approval::Each | Approval::Session => true,
        Approval::Writes => !req.is_read_only(),
        Approval::Never => false,
    };
    if let (true, Some(body)) = (may_need_card, &req.body) {
        let shown = crate::term::show_body(body).len();
        if shown > crate::term::MAX_SHOWN_BODY_BYTES {
            return Err(PolicyError::invalid(
                "body",
                format!(
                    "the body takes {shown} bytes to show on the approval card, more than the {} a person can be shown whole, so it could not be approved",
                    crate::term::MAX_SHOWN_BODY_BYTES
                ),
                "send a smaller body (split the work into several requests)",
            ));
        }
    }
    Ok(ValidatedRequest::Http(req))
}

/// Validates SSH arguments against the credential (which must be an SSH credential).
pub fn validate_ssh(cred: &Credential, args: SshArgs) -> Result<ValidatedRequest, PolicyError> {
    match &cred.target {
        Target::Ssh(t) => ssh::validate(t, args).map(ValidatedRequest::Ssh),
        Target::Http(_) => Err(wrong_kind(cred, "http", "http_request")),
    }
}

fn wrong_kind(cred: &Credential, kind: &str, tool: &str) -> PolicyError {
    PolicyError::invalid(
        "credential",
        format!("credential {:?} is an {kind} credential", cred.name),
        format!("use the {tool} tool with it, or pick another credential from list_credentials"),
    )
}

/// `timeout_s` and `max_output_bytes` of either tool, defaulted and bounded.
pub(crate) fn limits(
    timeout_s: Option<u64>,
    max_output: Option<u64>,
) -> Result<(u64, u64), PolicyError> {
    Ok((
        bounded("timeout_s", timeout_s, TIMEOUT_S)?,
        bounded("max_output_bytes", max_output, MAX_OUTPUT_BYTES)?,
    ))
}

pub(crate) fn bounded(
    field: &'static str,
    v: Option<u64>,
    (min, max, default): (u64, u64, u64),
) -> Result<u64, PolicyError> {
    match v {
        None => Ok(default),
        Some(n) if (min..=max).contains(&n) => Ok(n),
        Some(n) => Err(PolicyError::invalid(
            field,
            format!("{n} is outside {min}..={max}"),
            format!("pass a {field} between {min} and {max}"),
        )),
    }
}

#[cfg(test)]
mod refusal_tests;
#[cfg(test)]
mod tests;
