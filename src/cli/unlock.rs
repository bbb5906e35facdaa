//! `vault unlock`: check the passphrase and start the vault agent, which holds the key (and
//! replaces an agent already running).
use crate::agent::{handoff, DEFAULT_LIFETIME};
use crate::keys::{remember, PassphraseSource};
use crate::paths::VaultPaths;
use crate::vault::Vault;
use crate::Exit;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Read the passphrase from the first line of stdin (else VAULT_PASSPHRASE_FILE, else the terminal).
    #[arg(long)]
    passphrase_stdin: bool,
    /// How long the agent keeps the key, e.g. 30m, 8h, 2hours (default 8h); `vault lock` ends it
    /// sooner, and so does an hour with no request (`[agent] idle_seconds`; `vault config`).
    #[arg(long = "for", value_name = "DURATION", value_parser = super::parse_duration)]
    ttl: Option<Duration>,
    /// Also keep the key in the OS keyring, so a login unit can start the agent without asking
    /// (any process of yours that can reach that keyring can read it; `vault lock --forget`
    /// removes it).
    #[arg(long)]
    remember: bool,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let vault_id = Vault::id_of(&paths)?;
    let source = PassphraseSource::choose(args.passphrase_stdin);
    let passphrase = source.read("Vault passphrase: ")?;
    let keys = super::backend::keys_from(&paths, &source, &passphrase)?;
    let ttl = args.ttl.unwrap_or(DEFAULT_LIFETIME);
    let status = handoff::start_agent(&paths, &vault_id, &keys, ttl)?;
    if args.remember {
        remember::remember(&vault_id, &keys.master, &keys.approver.public())?;
        outln!(
            "The key is also in the {} (`vault lock --forget` removes it).",
            remember::keyring_name()
        );
    }
    outln!(
        "Unlocked vault {vault_id}: agent pid {} listens on {}; it locks at {} (or after {} idle minutes). `vault lock` locks now.",
        status.pid,
        status.socket,
        status.locks_at,
        status.idle_seconds / 60
    );
    super::verify::say_last_anchor(&paths)?;
    Ok(Exit::Ok)
}
