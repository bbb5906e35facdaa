//! Credentials: what each one may reach and how its secret is injected (never the secret itself in
//! anything printable), their validation, and the add / edit / rm / list service that both the CLI
//! and `vault mcp` use. Every change is one audit row in the same transaction.
pub(crate) mod http;
pub mod openbao_ref;
mod service;
mod signed;
mod ssh;
pub(crate) mod words;

pub use http::{
    check_allow_header, check_path_prefix, is_loopback, is_rewriting_header, normalize_host,
    parse_host, parse_methods, HttpAuth, HttpTarget, METHOD_PARAM,
};
pub use service::{
    add, add_as_approver, apply, edit, edit_as_approver, get, get_by_id, list, remove,
    remove_as_approver, Edit, NewCredential,
};
pub use signed::{
    as_added, is_signed, policy_payload, policy_signature, same_policy, sign_removal, Listed,
};
pub use ssh::{check_host_key, fetch_host_key, load_private_key, HostKeyError, SshAuth, SshTarget};

/// Most bytes a stored secret may have.
pub const MAX_SECRET_BYTES: usize = 16 * 1024;

/// Errors of credential validation and management.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error("a credential named {name:?} already exists in profile {profile:?}; pick another name, or change it with `vault edit {name}`")]
    Exists { profile: String, name: String },
    #[error("no credential named {name:?} in profile {profile:?}; see `vault list` for the names")]
    NotFound { profile: String, name: String },
    #[error("stored credential {id} cannot be read ({reason}); remove it with `vault rm` and add it again")]
    Damaged { id: String, reason: String },
    #[error(
        "nothing to change: give at least one option to `vault edit` (see `vault edit --help`)"
    )]
    NothingToChange,
    #[error("{0} needs the approver's signature, which only a command given the passphrase makes; nothing changed. Run the `vault` command in a terminal or with VAULT_PASSPHRASE_FILE")]
    Unsigned(&'static str),
    #[error("credential {name:?} changed since this command read it; nothing changed. Run the command again")]
    Stale { name: String },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Audit(#[from] crate::audit::AuditError),
}

pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> CredentialError {
    CredentialError::Invalid {
        field,
        reason: reason.into(),
    }
}

pub use crate::wire::Approval;

impl Approval {
    pub const ALL: [Approval; 4] = [
        Approval::Each,
        Approval::Session,
        Approval::Writes,
        Approval::Never,
    ];

    /// What the policy means, for `--help`.
    pub fn meaning(self) -> &'static str {
        match self {
            Approval::Each => "every action",
            Approval::Session => "once per MCP session, for a bounded time",
            Approval::Writes => "writes only: GET and HEAD run without a card",
            Approval::Never => "never (every action is still journaled)",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Approval::Each => "each",
            Approval::Session => "session",
            Approval::Writes => "writes",
            Approval::Never => "never",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

pub use crate::wire::Target;

impl Target {
    pub fn kind(&self) -> &'static str {
        match self {
            Target::Http(_) => "http",
            Target::Ssh(_) => "ssh",
        }
    }
    /// One line for people and agents: `https://api.example.com:443/v1 (bearer)`.
    pub fn summary(&self) -> String {
        match self {
            Target::Http(h) => h.summary(),
            Target::Ssh(s) => s.summary(),
        }
    }
    /// Whether approvals of this credential need a security-key touch (`--presence`).
    pub fn presence(&self) -> crate::wire::touch::Presence {
        match self {
            Target::Http(h) => h.presence,
            Target::Ssh(s) => s.presence,
        }
    }
}

pub use crate::wire::Credential;

pub use crate::wire::Secret;

impl Secret {
    /// Checks size, and that a secret destined for a header or URL has no control characters.
    pub(crate) fn check(&self, one_line: bool) -> Result<(), CredentialError> {
        let b = self.expose();
        if b.is_empty() {
            return Err(invalid("secret", "it is empty"));
        }
        if b.len() > MAX_SECRET_BYTES {
            return Err(invalid(
                "secret",
                format!("it is longer than {MAX_SECRET_BYTES} bytes"),
            ));
        }
        if one_line && b.iter().any(|&c| c < 0x20 || c == 0x7f) {
            return Err(invalid(
                "secret",
                "it contains control characters (a line break?); give it on one line",
            ));
        }
        Ok(())
    }
}

/// Names and profiles: `[A-Za-z0-9][A-Za-z0-9._-]{0,63}`.
pub fn check_name(field: &'static str, s: &str) -> Result<(), CredentialError> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            field,
            format!("{s:?} must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"),
        ))
    }
}

/// A fresh public identifier with a prefix: `cred_3f9a…` (16 random bytes, hex).
pub fn new_id(prefix: &str) -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random number generator failed");
    format!("{prefix}_{}", hex::encode(b))
}

/// A bearer credential bound to https://api.example.com/, approval `each`: the unit-test fixture.
#[cfg(test)]
pub(crate) fn test_bearer(name: &str, secret: &str) -> NewCredential {
    NewCredential {
        id: new_id("cred"),
        profile: "default".into(),
        name: name.into(),
        approval: Approval::Each,
        target: Target::Http(HttpTarget {
            presence: crate::wire::touch::Presence::None,
            scheme: "https".into(),
            host: "api.example.com".into(),
            port: 443,
            path_prefix: "/".into(),
            methods: None,
            auth: HttpAuth::Bearer,
            ca_file: None,
            allow_headers: Vec::new(),
            secret_from: None,
        }),
        secret: Secret::new(secret.as_bytes().to_vec()),
    }
}

#[cfg(test)]
mod tests;

/// The HTTP methods a request or a credential may name.
pub fn http_methods() -> &'static [&'static str] {
    http::METHODS
}
