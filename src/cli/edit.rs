//! `vault edit NAME …`: change a credential's rules or secret, signed by the approver as typed
//! here; its version goes up.
use super::backend::{unexpected, Backend};
use crate::agent::protocol::{Reply, Request};
use crate::cli::Exit;
use crate::credentials::{
    check_host_key, check_path_prefix, parse_methods, Approval, Edit, Secret, SshAuth, Target,
};
use crate::keys::{read_file_line, read_stdin_line};
use crate::paths::VaultPaths;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    #[arg(add = clap_complete::engine::ArgValueCandidates::new(super::completions::credential_names))]
    name: String,
    #[arg(long, default_value = "default", add = clap_complete::engine::ArgValueCandidates::new(super::completions::profile_names))]
    profile: String,
    #[arg(long, value_parser = super::approval_parser())]
    approval: Option<Approval>,
    /// What an approval needs besides the PIN: none, key or key-for-writes.
    #[arg(long, value_parser = super::presence_parser())]
    presence: Option<crate::wire::touch::Presence>,
    /// Move the binding: HTTP `https://host[:port]` or `http://` for loopback (as `vault add`
    /// takes it); SSH `host[:port]`. Signed like every change; old approvals stop matching.
    #[arg(long, value_name = "HOST")]
    host: Option<String>,
    /// HTTP: only URLs under this path.
    #[arg(long)]
    path_prefix: Option<String>,
    /// HTTP: only these methods; `any` lifts the limit.
    #[arg(long)]
    methods: Option<String>,
    /// HTTP: replace the request-rewriting headers the agent may send (repeatable), e.g.
    /// X-HTTP-Method-Override, X-Forwarded-For, or `_method` for the query parameter.
    #[arg(long = "allow-header", value_name = "NAME")]
    allow_headers: Vec<String>,
    /// HTTP: allow no request-rewriting header again.
    #[arg(long, conflicts_with = "allow_headers")]
    no_allow_header: bool,
    /// SSH: a new pinned host key fingerprint.
    #[arg(long, value_name = "SHA256:…")]
    host_key: Option<String>,
    /// SSH: replace the command allowlist (repeatable).
    #[arg(long = "allow-command", value_name = "PATTERN")]
    allow_commands: Vec<String>,
    /// SSH: allow any command again.
    #[arg(long, conflicts_with = "allow_commands")]
    any_command: bool,
    /// HTTP: replace the secret with the first line of stdin.
    #[arg(long, conflicts_with_all = ["secret_file", "key_file", "password_stdin"])]
    secret_stdin: bool,
    /// HTTP: replace the secret with the first line of a file.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["key_file", "password_stdin"])]
    secret_file: Option<PathBuf>,
    /// SSH: log in with this OpenSSH private key from now on (an encrypted key is decrypted
    /// now; its passphrase is asked once). Its type and fingerprint are shown.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["password_stdin", "secret_from"])]
    key_file: Option<PathBuf>,
    /// SSH: log in with the password on the first line of stdin from now on.
    #[arg(long, conflicts_with = "secret_from")]
    password_stdin: bool,
    #[command(flatten)]
    from: super::secret_from::SecretFrom,
    #[command(flatten)]
    passphrase: super::backend::PassphraseArg,
}

pub(super) fn run(paths: VaultPaths, mut a: Args) -> anyhow::Result<Exit> {
    super::credential_args::one_stdin(a.secret_stdin, "--secret-stdin", a.passphrase)?;
    super::credential_args::one_stdin(a.password_stdin, "--password-stdin", a.passphrase)?;
    a.from.check(a.passphrase)?;
    let edit = edit_of(&mut a)?;
    // Every change is signed by the approver: the passphrase opens the encrypted channel (or,
    // locked, the store here) and unlocks the approver key.
    let mut backend = Backend::verified(&paths, a.passphrase.source())?;
    let current = super::rm::current(&mut backend, &a.profile, &a.name)?;
    if edit.secret_from.is_some() {
        super::openbao::needs_login(&mut backend)?;
    }
    if edit.presence.is_some_and(|p| !p.is_none()) {
        super::approver::needs_key(&mut backend)?;
    }
    secret_flags_fit(&a, &current.target)?;
    let mut signed = current.clone();
    crate::credentials::apply(&mut signed, &edit)?;
    let signature = crate::credentials::policy_signature(
        super::approver(&backend)?,
        backend.vault_id(),
        &signed,
    );
    let cred = match backend.call(Request::EditCredential {
        profile: a.profile,
        name: a.name,
        version: current.version,
        edit,
        signature,
    })? {
        Reply::Credential(c) => c,
        other => return Err(unexpected(other)),
    };
    super::check_stored(&signed, &cred)?;
    outln!(
        "Updated {} (version {}): {}, approval {}",
        cred.name,
        cred.version,
        cred.target.summary(),
        cred.approval.as_str()
    );
    if let (Some(_), Target::Ssh(s)) = (&a.key_file, &cred.target) {
        if let SshAuth::Key {
            algorithm,
            fingerprint,
        } = &s.auth
        {
            outln!("New key: {algorithm} {fingerprint}; approvals given for version {} no longer match", current.version);
        }
    }
    // Only now, with the change stored and confirmed, may the source lose the secret.
    if let Some(done) = a.from.remove(&cred.name, &cred.profile)? {
        outln!("{done}");
    }
    Ok(Exit::Ok)
}

/// The secret's flag must fit the credential's kind: a key file or password for an SSH login
/// (one line of a key file would store a broken key), a line of text for an HTTP secret.
fn secret_flags_fit(a: &Args, target: &Target) -> anyhow::Result<()> {
    let (flag, fix) = match target {
        Target::Ssh(_) if a.secret_stdin || a.secret_file.is_some() || a.from.is_set() => (
            if a.secret_stdin {
                "--secret-stdin"
            } else if a.from.is_set() {
                "--secret-from"
            } else {
                "--secret-file"
            },
            "an ssh login changes its key with --key-file FILE, its password with --password-stdin",
        ),
        Target::Http(_) if a.key_file.is_some() || a.password_stdin => (
            if a.password_stdin {
                "--password-stdin"
            } else {
                "--key-file"
            },
            "an http credential's secret changes with --secret-file FILE, --secret-stdin or --secret-from SOURCE",
        ),
        _ => return Ok(()),
    };
    Err(crate::credentials::CredentialError::Invalid {
        field: flag,
        reason: format!(
            "{} is {}: {fix}; nothing was changed",
            a.name,
            target.kind()
        ),
    }
    .into())
}

/// What the flags ask to change, each value checked as `vault add` checks it.
fn edit_of(a: &mut Args) -> anyhow::Result<Edit> {
    let (secret, ssh_auth) = if let Some(s) = a.from.read()? {
        (Some(s), None)
    } else if a.secret_stdin {
        (Some(line_secret(read_stdin_line("secret")?)), None)
    } else if let Some(f) = &a.secret_file {
        (Some(line_secret(read_file_line("secret", f)?)), None)
    } else if let Some(f) = &a.key_file {
        let (secret, auth) = super::credential_args::key_from_file(f)?;
        (Some(secret), Some(auth))
    } else if a.password_stdin {
        let password = line_secret(read_stdin_line("password")?);
        (Some(password), Some(SshAuth::Password))
    } else {
        (None, None)
    };
    if let Some(k) = &a.host_key {
        check_host_key(k)?;
    }
    Ok(Edit {
        secret_from: a.from.reference()?,
        approval: a.approval,
        presence: a.presence,
        host: a.host.take(),
        path_prefix: a
            .path_prefix
            .as_deref()
            .map(check_path_prefix)
            .transpose()?,
        methods: match a.methods.as_deref() {
            None => None,
            Some("any") => Some(None),
            Some(m) => Some(Some(parse_methods(m)?)),
        },
        host_key: a.host_key.take(),
        allow_commands: if a.any_command {
            Some(Vec::new())
        } else if a.allow_commands.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut a.allow_commands))
        },
        allow_headers: if a.no_allow_header {
            Some(Vec::new())
        } else if a.allow_headers.is_empty() {
            None
        } else {
            Some(super::credential_args::allow_headers(&a.allow_headers)?)
        },
        ssh_auth,
        secret,
    })
}

fn line_secret(line: zeroize::Zeroizing<String>) -> Secret {
    Secret::new(line.as_bytes().to_vec())
}
