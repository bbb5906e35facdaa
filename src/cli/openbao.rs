//! `vault openbao login|status|logout`: team mode's connection to the team's OpenBao. `login`
//! checks the login against the server at once (nothing is stored when it fails), then hands the
//! approver-signed login and its secret_id (or token) to the agent, which keeps them encrypted in
//! `vault.db` and logs in, renews and logs in again by itself. `logout` removes them, signed.
//! The secret_id or token comes from stdin only, never argv.
use super::backend::{read_keys, unexpected, Backend, PassphraseArg};
use crate::agent::protocol::{OpenBaoView, Reply, Request};
use crate::cli::Exit;
use crate::keys::read_stdin_line;
use crate::openbao;
use crate::paths::VaultPaths;
use crate::services::openbao::login;
use crate::term::escape;
use crate::vault::Vault;
use crate::wire::{OpenBaoAuth, OpenBaoLogin, Secret};
use secrecy::SecretString;
use std::path::PathBuf;

#[derive(Debug, clap::Subcommand)]
pub(super) enum Sub {
    /// Log the vault in to the team's OpenBao (checked now; asks for the passphrase).
    Login(LoginArgs),
    /// Where the vault logs in to OpenBao, and how its token stands.
    Status(StatusArgs),
    /// Remove the vault's OpenBao login (asks for the passphrase).
    Logout(LogoutArgs),
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("how").required(true).args(["secret_id_stdin", "token_stdin"])))]
pub(super) struct LoginArgs {
    /// The server: https://HOST[:PORT] (http:// only on loopback, for a dev server).
    #[arg(long, value_name = "URL")]
    address: String,
    /// A PEM file of the CA that signed the server's certificate (a private CA).
    #[arg(long, value_name = "FILE")]
    ca_file: Option<PathBuf>,
    /// AppRole: the role_id (not a secret); the secret_id comes with --secret-id-stdin.
    #[arg(long, value_name = "ID", requires = "secret_id_stdin")]
    role_id: Option<String>,
    /// AppRole: read the secret_id from the next line of stdin (after the passphrase, with
    /// --passphrase-stdin).
    #[arg(long, requires = "role_id")]
    secret_id_stdin: bool,
    /// The KV v2 mount the journal's head is kept in, at agent-vault/<vault id>/journal-head
    /// (the token's policy must allow it to read and write there).
    #[arg(long, value_name = "MOUNT", default_value = "secret")]
    journal_mount: String,
    /// Where the AppRole auth method is mounted.
    #[arg(long, value_name = "MOUNT", default_value = "approle")]
    approle_mount: String,
    /// Use this token as it is (read from the next line of stdin) instead of AppRole; the vault
    /// cannot log in again when it expires.
    #[arg(long)]
    token_stdin: bool,
    #[command(flatten)]
    passphrase: PassphraseArg,
}

#[derive(Debug, clap::Args)]
pub(super) struct StatusArgs {
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    passphrase: PassphraseArg,
}

#[derive(Debug, clap::Args)]
pub(super) struct LogoutArgs {
    #[command(flatten)]
    passphrase: PassphraseArg,
}

pub(super) fn run(paths: VaultPaths, sub: Sub) -> anyhow::Result<Exit> {
    match sub {
        Sub::Login(a) => login(paths, a),
        Sub::Status(a) => status(paths, a),
        Sub::Logout(a) => logout(paths, a),
    }
}

fn login(paths: VaultPaths, a: LoginArgs) -> anyhow::Result<Exit> {
    let vault_id = Vault::id_of(&paths)?;
    let ca_file = match &a.ca_file {
        Some(p) => Some(
            std::fs::canonicalize(p)
                .map_err(|e| anyhow::anyhow!("cannot read --ca-file {}: {e}", p.display()))?
                .display()
                .to_string(),
        ),
        None => None,
    };
    let auth = match a.role_id {
        Some(role_id) => OpenBaoAuth::Approle {
            mount: a.approle_mount,
            role_id,
        },
        None => OpenBaoAuth::Token,
    };
    let wanted = OpenBaoLogin {
        address: a.address,
        ca_file,
        auth,
        journal_mount: a.journal_mount,
    };
    let source = a.passphrase.source();
    let keys = read_keys(&paths, &source, "Vault passphrase (to sign the login): ")?;
    let what = match wanted.auth {
        OpenBaoAuth::Approle { .. } => "secret_id",
        OpenBaoAuth::Token => "token",
    };
    let line = read_stdin_line(what)?;
    let secret = Secret::new(line.as_bytes().to_vec());
    // Checked now, so a wrong address, role or secret_id is said here and nothing is stored.
    let client = openbao::Client::new(&openbao::Config {
        ca_file: wanted.ca_file.as_ref().map(Into::into),
        ..openbao::Config::new(&wanted.address)
    })?;
    let checked = match &wanted.auth {
        OpenBaoAuth::Approle { mount, role_id } => client
            .login_approle(mount, role_id, &SecretString::from(line.as_str()))
            .map(|l| {
                format!(
                    "AppRole login works (token lease {} s, policies {})",
                    l.lease.as_secs(),
                    l.policies.join(",")
                )
            }),
        OpenBaoAuth::Token => client
            .lookup_self(&openbao::Token::new(SecretString::from(line.as_str())))
            .map(|t| {
                format!(
                    "the token works (valid for {} s more, {})",
                    t.ttl.as_secs(),
                    if t.renewable {
                        "renewable"
                    } else {
                        "not renewable"
                    }
                )
            }),
    }
    .map_err(|e| anyhow::anyhow!("{e}; nothing was stored"))?;
    let request = login::sign_login(&keys.approver, &vault_id, &wanted, &secret);
    let mut backend = Backend::secure(&paths, keys)?;
    match backend.call(Request::OpenBaoLogin { request, secret })? {
        Reply::Ok => {}
        other => return Err(unexpected(other)),
    }
    outln!(
        "Logged in to OpenBao at {}: {checked}. Credentials added with --secret-from openbao:MOUNT/PATH#FIELD now read their secret from it.",
        escape(client.address())
    );
    Ok(Exit::Ok)
}

/// A credential that reads its secret from OpenBao needs the vault's login first.
pub(super) fn needs_login(backend: &mut Backend) -> anyhow::Result<()> {
    match backend.call(Request::OpenBaoStatus)? {
        Reply::OpenBao(OpenBaoView { login: Some(_), .. }) => Ok(()),
        Reply::OpenBao(_) => anyhow::bail!(
            "the vault is not logged in to OpenBao, where --secret-from openbao: reads the secret; nothing changed. Log in first with `vault openbao login --address URL --role-id ID --secret-id-stdin`"
        ),
        other => Err(unexpected(other)),
    }
}

fn status(paths: VaultPaths, a: StatusArgs) -> anyhow::Result<Exit> {
    let mut backend = Backend::open(&paths, a.passphrase.source())?;
    let view = match backend.call(Request::OpenBaoStatus)? {
        Reply::OpenBao(v) => v,
        other => return Err(unexpected(other)),
    };
    if a.json {
        super::print_json(&serde_json::to_value(&view)?)?;
        return Ok(if view.last_error.is_some() {
            Exit::Failure
        } else {
            Exit::Ok
        });
    }
    show(&view)?;
    Ok(if view.last_error.is_some() {
        Exit::Failure
    } else {
        Exit::Ok
    })
}

fn show(view: &OpenBaoView) -> anyhow::Result<()> {
    let Some(l) = &view.login else {
        outln!("Not logged in to OpenBao (team mode is off). Log in with `vault openbao login --address URL --role-id ID --secret-id-stdin`.");
        return Ok(());
    };
    let how = match &l.auth {
        OpenBaoAuth::Approle { mount, role_id } => format!(
            "AppRole at auth/{}, role_id {}",
            escape(mount),
            escape(role_id)
        ),
        OpenBaoAuth::Token => "a token given as it is".to_owned(),
    };
    outln!("OpenBao at {} ({how})", escape(&l.address));
    match &view.token {
        Some(t) => outln!("  {t}"),
        None => outln!("  the vault is locked: the agent logs in when it is unlocked"),
    }
    if let Some(e) = &view.last_error {
        outln!("  last error: {}", escape(e));
    }
    Ok(())
}

fn logout(paths: VaultPaths, a: LogoutArgs) -> anyhow::Result<Exit> {
    let vault_id = Vault::id_of(&paths)?;
    let source = a.passphrase.source();
    let keys = read_keys(&paths, &source, "Vault passphrase (to sign the logout): ")?;
    let request = login::sign_logout(&keys.approver, &vault_id);
    let mut backend = Backend::secure(&paths, keys)?;
    match backend.call(Request::OpenBaoLogout { request })? {
        Reply::Ok => outln!("Logged out of OpenBao: the stored secret_id or token is gone. Credentials that read their secret from it fail until the next `vault openbao login`."),
        other => return Err(unexpected(other)),
    }
    Ok(Exit::Ok)
}
