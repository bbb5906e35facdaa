//! `vault approver show-key`: the approver's public key, to keep elsewhere (an export is held to
//! it: `vault verify --file … --approver-key`). `add-key [--name NAME]`, `keys [--json]` and
//! `remove-key NAME`: the FIDO2 security keys whose touch a credential's approvals can require
//! (`--presence key`). Adding and removing are signed with the passphrase, so a process of the
//! person's user cannot register a key of its own; the registration itself is a touch of the key
//! (makeCredential over USB).
use super::backend::{read_keys, unexpected, Backend, PassphraseArg};
use crate::agent::protocol::{KeyView, Reply, Request};
use crate::approvals::touch;
use crate::cli::Exit;
use crate::fido;
use crate::paths::VaultPaths;
use crate::term::escape;
use crate::vault::Vault;
use crate::wire::Op;
use std::time::Duration;

#[derive(Debug, clap::Subcommand)]
pub(super) enum Sub {
    /// Print the approver's public key (hex, then as an ssh-ed25519 line), read from
    /// vault.key.age with the passphrase; keep it off this machine.
    ShowKey(ShowArgs),
    /// Register a security key (touch it when it blinks); asks for the passphrase, and for the
    /// key's PIN when it has one. Two keys may be registered: a main one and a backup.
    AddKey(AddArgs),
    /// List the registered security keys.
    Keys(KeysArgs),
    /// Remove a registered security key by name; asks for the passphrase.
    RemoveKey(RemoveArgs),
}

#[derive(Debug, clap::Args)]
pub(super) struct AddArgs {
    /// A name for people (`main`, `backup`): 1 to 32 letters, digits, '.', '_' or '-'.
    #[arg(long)]
    name: Option<String>,
    /// How long to wait for the touch, in seconds.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
    #[command(flatten)]
    passphrase: PassphraseArg,
}

#[derive(Debug, clap::Args)]
pub(super) struct ShowArgs {
    /// Print one JSON object: `{"vault_id","hex","ssh"}`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    passphrase: PassphraseArg,
}

#[derive(Debug, clap::Args)]
pub(super) struct KeysArgs {
    /// Print a JSON array.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    passphrase: PassphraseArg,
}

#[derive(Debug, clap::Args)]
pub(super) struct RemoveArgs {
    /// The key's name, as `vault approver keys` lists it.
    name: String,
    #[command(flatten)]
    passphrase: PassphraseArg,
}

pub(super) fn run(paths: VaultPaths, sub: Sub) -> anyhow::Result<Exit> {
    match sub {
        Sub::ShowKey(a) => show_key(paths, a),
        Sub::AddKey(a) => add(paths, a),
        Sub::Keys(a) => list(paths, a),
        Sub::RemoveKey(a) => remove(paths, a),
    }
}

/// The approver's public key from `vault.key.age` (the passphrase opens it): the one source a
/// process of this user cannot swap without the passphrase, unlike the database or the agent.
fn show_key(paths: VaultPaths, a: ShowArgs) -> anyhow::Result<Exit> {
    let vault_id = Vault::id_of(&paths)?;
    let source = a.passphrase.source();
    let public = read_keys(
        &paths,
        &source,
        "Vault passphrase (to read the approver key): ",
    )?
    .approver
    .public();
    print_public_key(&vault_id, &public, a.json)?;
    Ok(Exit::Ok)
}

/// The approver's public key on stdout (hex, then the ssh-ed25519 line; or one JSON object), and
/// on stderr why to keep it elsewhere: `vault init` and `vault approver show-key`.
pub(super) fn print_public_key(
    vault_id: &str,
    public: &ed25519_dalek::VerifyingKey,
    json: bool,
) -> anyhow::Result<()> {
    use crate::keys::public::{to_hex, to_ssh_line};
    if json {
        super::print_json(&serde_json::json!({
            "vault_id": vault_id, "hex": to_hex(public), "ssh": to_ssh_line(public),
        }))?;
    } else {
        outln!("{}", to_hex(public));
        outln!("{}", to_ssh_line(public));
    }
    keep_it_elsewhere(vault_id);
    Ok(())
}

/// On stderr: what the approver public key is for, and to keep it off this machine.
pub(super) fn keep_it_elsewhere(vault_id: &str) {
    super::out::note(format_args!(
        "That is the approver public key of vault {vault_id}. Keep a copy off this machine: `vault verify --file EXPORT --approver-key KEY` holds an export to it, and whoever rewrites the journal here cannot forge its signatures. `vault approver show-key` prints it again."
    ));
}

fn keys_of(backend: &mut Backend) -> anyhow::Result<Vec<KeyView>> {
    match backend.call(Request::ApproverKeys)? {
        Reply::ApproverKeys(k) => Ok(k),
        other => Err(unexpected(other)),
    }
}

/// Refuses a credential that would need a touch while no key is registered (nothing could be
/// approved).
pub(super) fn needs_key(backend: &mut Backend) -> anyhow::Result<()> {
    if keys_of(backend)?.is_empty() {
        anyhow::bail!("--presence key needs a registered security key, and this vault has none; nothing was changed. Register one with `vault approver add-key` first");
    }
    Ok(())
}

fn add(paths: VaultPaths, a: AddArgs) -> anyhow::Result<Exit> {
    let vault_id = Vault::id_of(&paths)?;
    let source = a.passphrase.source();
    let keys = read_keys(
        &paths,
        &source,
        "Vault passphrase (to sign the registration): ",
    )?;
    let mut backend = Backend::secure(&paths, keys)?;
    let existing = keys_of(&mut backend)?;
    if existing.len() >= touch::MAX_KEYS {
        anyhow::bail!("{} keys are registered (a main one and a backup); remove one first with `vault approver remove-key NAME`", existing.len());
    }
    let name = a.name.unwrap_or_else(|| {
        if existing.is_empty() {
            "main"
        } else {
            "backup"
        }
        .to_owned()
    });
    if !touch::name_ok(&name) {
        anyhow::bail!(
            "--name {:?}: a key name is 1 to 32 letters, digits, '.', '_' or '-'",
            escape(&name)
        );
    }
    let exclude: Vec<Vec<u8>> = existing
        .iter()
        .filter_map(|k| hex::decode(&k.key.credential_id).ok())
        .collect();
    let mut key = fido::hid::HidKey::first(Duration::from_secs(a.timeout))?;
    super::out::note(format_args!(
        "Registering your security key as {name}: type its PIN if it asks, then touch it when it blinks (waiting {} s)…",
        a.timeout
    ));
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce).expect("the OS random number generator failed");
    // A key with a PIN verifies its person too: the PIN is asked on the terminal only (never
    // stdin or a file: the person is at the key anyway), goes to the key encrypted, and is
    // dropped once the key has turned it into a token.
    let mut ask_pin = || terminal_pin("run `vault approver add-key` in a terminal to type it");
    let reg = fido::register(
        &mut key,
        &vault_id,
        &hex::encode(nonce),
        &exclude,
        &mut ask_pin,
    )?;
    let registered = touch::registered(&reg, &name);
    let request = touch::sign_key_change(
        super::approver(&backend)?,
        &vault_id,
        Op::AddKey,
        registered,
    );
    let now = match backend.call(Request::AddApproverKey { request })? {
        Reply::ApproverKeys(k) => k,
        other => return Err(unexpected(other)),
    };
    outln!(
        "Registered security key {name} ({}, credential {}). {} key{} registered.",
        reg.algorithm,
        short(&hex::encode(&reg.credential_id)),
        now.len(),
        if now.len() == 1 { "" } else { "s" }
    );
    if now.len() == 1 {
        outln!("Register a backup key too (`vault approver add-key --name backup`): a credential under --presence key cannot be approved without one of them.");
    }
    Ok(Exit::Ok)
}

fn list(paths: VaultPaths, a: KeysArgs) -> anyhow::Result<Exit> {
    let mut backend = Backend::open(&paths, a.passphrase.source())?;
    let keys = keys_of(&mut backend)?;
    if a.json {
        super::print_json(&serde_json::to_value(&keys)?)?;
        return Ok(Exit::Ok);
    }
    if keys.is_empty() {
        outln!("No security key is registered. `vault approver add-key` registers one.");
        return Ok(Exit::Ok);
    }
    for k in &keys {
        outln!(
            "{}  {}  credential {}  registered {}  counter {}",
            escape(&k.key.name),
            k.key.algorithm,
            short(&k.key.credential_id),
            super::out::local_time(&k.added_at),
            k.counter
        );
    }
    Ok(Exit::Ok)
}

fn remove(paths: VaultPaths, a: RemoveArgs) -> anyhow::Result<Exit> {
    let vault_id = Vault::id_of(&paths)?;
    let source = a.passphrase.source();
    let keys = read_keys(&paths, &source, "Vault passphrase (to sign the removal): ")?;
    let mut backend = Backend::secure(&paths, keys)?;
    let Some(found) = keys_of(&mut backend)?
        .into_iter()
        .find(|k| k.key.name == a.name)
    else {
        anyhow::bail!(
            "no security key named {} is registered; `vault approver keys` lists them",
            escape(&a.name)
        );
    };
    let request = touch::sign_key_change(
        super::approver(&backend)?,
        &vault_id,
        Op::RemoveKey,
        found.key,
    );
    let left = match backend.call(Request::RemoveApproverKey { request })? {
        Reply::ApproverKeys(k) => k,
        other => return Err(unexpected(other)),
    };
    outln!(
        "Removed security key {}; {} key{} registered. Its touches approve nothing from now on.",
        escape(&a.name),
        left.len(),
        if left.len() == 1 { " is" } else { "s are" }
    );
    Ok(Exit::Ok)
}

/// A touch of the first security key on USB over `challenge`, for one of `allow`: what `vault
/// approve` does on `a` where the credential needs one. `ask_pin` is called only for a key that
/// wants its PIN for every signature (alwaysUv).
pub(super) fn usb_touch(
    challenge: &[u8; 32],
    allow: &[Vec<u8>],
    wait: Duration,
    ask_pin: fido::AskPin<'_>,
) -> Result<crate::wire::touch::TouchProof, String> {
    let mut key = fido::hid::HidKey::first(wait).map_err(|e| e.to_string())?;
    let t = fido::touch(&mut key, challenge, allow, ask_pin).map_err(|e| e.to_string())?;
    Ok(crate::wire::touch::TouchProof {
        credential_id: hex::encode(t.credential_id),
        authenticator_data: hex::encode(t.auth_data),
        signature: hex::encode(t.signature),
    })
}

/// A security key's PIN, asked on the controlling terminal with echo off (never stdin or a file:
/// whoever types it is at the key anyway); `instead` says what to do without a terminal.
pub(super) fn terminal_pin(
    instead: &'static str,
) -> Result<secrecy::SecretString, fido::FidoError> {
    crate::keys::read_terminal("security key PIN", "Security key PIN: ", instead)
        .map(|pin| secrecy::SecretString::from(pin.as_str()))
        .map_err(|e| fido::FidoError::NoPin(e.to_string()))
}

/// The first 16 hex digits of a credential id.
fn short(hex_id: &str) -> &str {
    hex_id.get(..16).unwrap_or(hex_id)
}
