//! `vault resume`: lift the pause switch (needs the passphrase, so an agent cannot).
use crate::approvals;
use crate::keys::PassphraseSource;
use crate::paths::VaultPaths;
use crate::vault::Vault;
use crate::Exit;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Read the passphrase from the first line of stdin (else VAULT_PASSPHRASE_FILE, else the terminal).
    #[arg(long)]
    passphrase_stdin: bool,
}

pub fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let passphrase = PassphraseSource::choose(args.passphrase_stdin).read("Vault passphrase: ")?;
    let (mut vault, keys) = Vault::open_with_passphrase(paths, &passphrase)?;
    if approvals::resume(&mut vault.store, &keys.approver)? {
        println!("Resumed: tool calls work again.");
    } else {
        println!("The vault was not paused.");
    }
    Ok(Exit::Ok)
}
