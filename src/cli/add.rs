//! `vault add http|ssh NAME …`: add a credential; the secret never comes from argv.
use super::backend::{unexpected, Backend};
use crate::agent::protocol::{Reply, Request};
use crate::cli::Exit;
use crate::credentials::{
    self, fetch_host_key, parse_host, Approval, HttpAuth, HttpTarget, NewCredential, Secret,
    SshAuth, SshTarget, Target,
};
use crate::keys::{read_file_line, read_stdin_line, read_terminal};
use crate::paths::VaultPaths;
use crate::wire::touch::Presence;
use anyhow::Context;
use clap::ArgGroup;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Subcommand)]
pub(super) enum Kind {
    /// An HTTP API credential bound to one scheme + host + port (+ path prefix).
    Http(HttpArgs),
    /// An SSH login bound to one host, port, user and pinned host key.
    Ssh(SshArgs),
}

#[derive(Debug, clap::Args)]
pub(super) struct Common {
    /// When a person must approve: each action, once per session, writes only, or never.
    #[arg(long, value_parser = super::approval_parser(), default_value = "each")]
    approval: Approval,
    /// What an approval needs besides the PIN: `key` (a touch of a registered security key,
    /// `vault approver add-key`) or `key-for-writes`.
    #[arg(long, value_parser = super::presence_parser(), default_value = "none")]
    presence: Presence,
    /// Profile the credential belongs to (`vault mcp --profile P` sees only that profile).
    #[arg(long, default_value = "default", add = clap_complete::engine::ArgValueCandidates::new(super::completions::profile_names))]
    profile: String,
    /// Print the added credential as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    passphrase: super::backend::PassphraseArg,
}

#[derive(Debug, clap::Args)]
#[command(group(ArgGroup::new("inject").required(true).args(["bearer", "basic", "header", "query"])))]
#[command(group(ArgGroup::new("source").args(["secret_stdin", "secret_file"])))]
pub(super) struct HttpArgs {
    /// Credential name, e.g. github.
    name: String,
    /// host[:port] or https://host[:port]; a loopback target says http:// or https://.
    #[arg(long)]
    host: String,
    /// Only URLs under this path, e.g. /v1/.
    #[arg(long, default_value = "/")]
    path_prefix: String,
    /// Only these methods, e.g. GET,POST.
    #[arg(long)]
    methods: Option<String>,
    /// Send `Authorization: Bearer <secret>`.
    #[arg(long)]
    bearer: bool,
    /// Send HTTP basic auth as USER with the secret as password.
    #[arg(long, value_name = "USER")]
    basic: Option<String>,
    /// Send the secret in this header.
    #[arg(long, value_name = "NAME")]
    header: Option<String>,
    /// Header value template, with {secret} once.
    #[arg(long, requires = "header", default_value = "{secret}")]
    format: String,
    /// Send the secret as this query parameter.
    #[arg(long, value_name = "PARAM")]
    query: Option<String>,
    /// Let the agent send this request-rewriting header (repeatable): X-HTTP-Method-Override,
    /// X-HTTP-Method, X-Method-Override, X-Original-URL, X-Rewrite-URL, Forwarded,
    /// X-Forwarded-*, or `_method` for the query parameter. Refused otherwise.
    #[arg(long = "allow-header", value_name = "NAME")]
    allow_headers: Vec<String>,
    /// Extra trusted root certificates (PEM) for this host.
    #[arg(long, value_name = "FILE")]
    ca_file: Option<PathBuf>,
    /// Read the secret from the first line of stdin.
    #[arg(long)]
    secret_stdin: bool,
    /// Read the secret from the first line of a file.
    #[arg(long, value_name = "FILE")]
    secret_file: Option<PathBuf>,
    #[command(flatten)]
    from: super::secret_from::SecretFrom,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, clap::Args)]
#[command(group(ArgGroup::new("auth").required(true).args(["key_file", "password_stdin", "cert_from"])))]
#[command(group(ArgGroup::new("pin").required(true).args(["host_key", "fetch_host_key"])))]
pub(super) struct SshArgs {
    /// Credential name, e.g. prod-web.
    name: String,
    /// Host name or IP address.
    #[arg(long)]
    host: String,
    #[arg(long, default_value_t = 22)]
    port: u16,
    #[arg(long)]
    user: String,
    /// OpenSSH private key file (an encrypted key is decrypted now; its passphrase is asked once).
    #[arg(long, value_name = "FILE")]
    key_file: Option<PathBuf>,
    /// Read the password from the first line of stdin.
    #[arg(long)]
    password_stdin: bool,
    /// Team mode: log in with a short-lived certificate from the team's OpenBao SSH CA
    /// (openbao:MOUNT/sign/ROLE), over a key made in memory for each action; no key is stored.
    #[arg(long, value_name = "openbao:MOUNT/sign/ROLE")]
    cert_from: Option<String>,
    /// The server's host key fingerprint, SHA256:… (`ssh-keyscan HOST | ssh-keygen -lf -`).
    #[arg(long, value_name = "SHA256:…")]
    host_key: Option<String>,
    /// Connect now, show the server's host key fingerprint and ask you to confirm it.
    #[arg(long)]
    fetch_host_key: bool,
    /// Only commands matching this pattern word for word (repeatable): `*` stands for plain words,
    /// never an option the pattern does not spell, and a matched command is sent with each word
    /// single-quoted. Without it any command may be asked for.
    #[arg(long = "allow-command", value_name = "PATTERN")]
    allow_commands: Vec<String>,
    #[command(flatten)]
    common: Common,
}

pub(super) fn run(paths: VaultPaths, kind: Kind) -> anyhow::Result<Exit> {
    // Arguments are checked (and the secret read) first; then the secret goes only to an agent
    // that proves it holds the vault's key (or, locked, into the store opened here).
    let mut from = super::secret_from::SecretFrom::default();
    let (common, target, secret, name) = match kind {
        Kind::Http(mut a) => {
            super::credential_args::one_stdin(
                a.secret_stdin,
                "--secret-stdin",
                a.common.passphrase,
            )?;
            a.from.check(a.common.passphrase)?;
            from = std::mem::take(&mut a.from);
            http(a, &mut from)?
        }
        Kind::Ssh(a) => {
            super::credential_args::one_stdin(
                a.password_stdin,
                "--password-stdin",
                a.common.passphrase,
            )?;
            ssh(a)?
        }
    };

    let mut target = target;
    match &mut target {
        Target::Http(h) => h.presence = common.presence,
        Target::Ssh(s) => s.presence = common.presence,
    }
    let new = NewCredential {
        id: credentials::new_id("cred"),
        profile: common.profile,
        name,
        approval: common.approval,
        target,
        secret,
    };
    new.check()?;
    // The passphrase opens the encrypted channel to the agent (or, locked, the store here), and
    // the approver signs the credential exactly as typed here, bindings and policy alike.
    let mut backend = Backend::verified(&paths, common.passphrase.source())?;
    let from_openbao = match &new.target {
        Target::Http(h) => h.secret_from.is_some(),
        Target::Ssh(s) => matches!(s.auth, SshAuth::OpenbaoCert { .. }),
    };
    if from_openbao {
        super::openbao::needs_login(&mut backend)?;
    }
    if !new.target.presence().is_none() {
        super::approver::needs_key(&mut backend)?;
    }
    let signed = credentials::as_added(&new);
    let signature =
        credentials::policy_signature(super::approver(&backend)?, backend.vault_id(), &signed);
    let cred = match backend.call(Request::AddCredential { new, signature })? {
        Reply::Credential(c) => c,
        other => return Err(unexpected(other)),
    };
    super::check_stored(&signed, &cred)?;
    if common.json {
        super::print_json(&super::list::credential_json(&cred, true))?;
    } else {
        outln!(
            "Added {} ({}) to profile {}: {}, approval {}",
            cred.name,
            cred.target.kind(),
            cred.profile,
            cred.target.summary(),
            cred.approval.as_str()
        );
    }
    // Only now, with the credential stored and confirmed, may the source lose the secret.
    if let Some(done) = from.remove(&cred.name, &cred.profile)? {
        if !common.json {
            outln!("{done}");
        }
    }
    Ok(Exit::Ok)
}

fn http(
    a: HttpArgs,
    from: &mut super::secret_from::SecretFrom,
) -> anyhow::Result<(Common, Target, Secret, String)> {
    let (scheme, host, port) = parse_host(&a.host, "https")?;
    let auth = if a.bearer {
        HttpAuth::Bearer
    } else if let Some(username) = a.basic {
        HttpAuth::Basic { username }
    } else if let Some(name) = a.header {
        HttpAuth::Header {
            name,
            format: a.format,
        }
    } else if let Some(param) = a.query {
        HttpAuth::Query { param }
    } else {
        unreachable!("clap requires one injection flag")
    };
    let ca_file = match a.ca_file {
        Some(p) => Some(
            std::fs::canonicalize(&p)
                .with_context(|| format!("cannot read --ca-file {}", p.display()))?
                .display()
                .to_string(),
        ),
        None => None,
    };
    let target = Target::Http(HttpTarget {
        presence: crate::wire::touch::Presence::None,
        scheme,
        host,
        port,
        path_prefix: credentials::check_path_prefix(&a.path_prefix)?,
        methods: a
            .methods
            .as_deref()
            .map(credentials::parse_methods)
            .transpose()?,
        auth,
        ca_file,
        allow_headers: super::credential_args::allow_headers(&a.allow_headers)?,
        secret_from: from.reference()?,
    });
    if from.reference()?.is_some() {
        // Team mode: the agent reads the secret from OpenBao at every call; none is stored.
        return Ok((a.common, target, Secret::new(Vec::new()), a.name));
    }
    if let Some(secret) = from.read()? {
        return Ok((a.common, target, secret, a.name));
    }
    let secret = if a.secret_stdin {
        read_stdin_line("secret")?
    } else if let Some(f) = &a.secret_file {
        read_file_line("secret", f)?
    } else {
        read_terminal(
            "secret",
            &format!("Secret for {}: ", a.name),
            "give it with --secret-file FILE, --secret-stdin or --secret-from SOURCE",
        )?
    };
    Ok((
        a.common,
        target,
        Secret::new(secret.as_bytes().to_vec()),
        a.name,
    ))
}

fn ssh(a: SshArgs) -> anyhow::Result<(Common, Target, Secret, String)> {
    let host = credentials::normalize_host(&a.host)?;
    if a.port == 0 {
        anyhow::bail!(credentials::CredentialError::Invalid {
            field: "--port",
            reason: "must be 1-65535".into()
        });
    }
    let (secret, auth) = match (&a.key_file, &a.cert_from) {
        (_, Some(c)) => {
            let (mount, role) = credentials::openbao_ref::parse_cert(c)?;
            (
                Secret::new(Vec::new()),
                SshAuth::OpenbaoCert { mount, role },
            )
        }
        (Some(f), None) => super::credential_args::key_from_file(f)?,
        (None, None) => (
            Secret::new(read_stdin_line("password")?.as_bytes().to_vec()),
            SshAuth::Password,
        ),
    };
    let host_key = match a.host_key {
        Some(k) => k,
        None => {
            let fp = fetch_host_key(&host, a.port, Duration::from_secs(10))?;
            let question = format!(
                "{host}:{} presents host key {fp}\nTrust this key for {}? [y/N] ",
                a.port, a.name
            );
            if !super::confirm_on_terminal(&question)? {
                anyhow::bail!("host key not confirmed; nothing was added. Compare it with the server's `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` and pin it with --host-key");
            }
            fp
        }
    };
    let target = Target::Ssh(SshTarget {
        presence: crate::wire::touch::Presence::None,
        host,
        port: a.port,
        user: a.user,
        host_key,
        auth,
        allow_commands: a.allow_commands,
    });
    Ok((a.common, target, secret, a.name))
}
