//! `vault unlock`: check the passphrase and put the master key in the keyring.
use crate::keys::{PassphraseSource, DEFAULT_KERNEL_TTL};
use crate::paths::VaultPaths;
use crate::vault::Vault;
use crate::Exit;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Read the passphrase from the first line of stdin (else VAULT_PASSPHRASE_FILE, else the terminal).
    #[arg(long)]
    passphrase_stdin: bool,
    /// How long the kernel keyring keeps the key, e.g. 30m, 8h (OS keyrings keep it until `vault lock`).
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
    ttl: Option<Duration>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let d: jiff::SignedDuration = s
        .parse()
        .map_err(|e| format!("{s:?} is not a duration like 30m or 8h: {e}"))?;
    Duration::try_from(d)
        .ok()
        .filter(|d| d.as_secs() >= 1)
        .ok_or_else(|| "the duration must be at least one second".to_owned())
}

pub fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let passphrase = PassphraseSource::choose(args.passphrase_stdin).read("Vault passphrase: ")?;
    let ttl = args.ttl.unwrap_or(DEFAULT_KERNEL_TTL);
    let (vault, backend) = Vault::unlock(paths, &passphrase, ttl)?;
    match backend {
        crate::keys::Backend::Kernel => println!(
            "Unlocked vault {}: the key is in the {backend} for {}s; `vault lock` removes it sooner.",
            vault.vault_id,
            ttl.as_secs()
        ),
        _ => println!("Unlocked vault {}: the key is in the {backend}; `vault lock` removes it.", vault.vault_id),
    }
    Ok(Exit::Ok)
}
