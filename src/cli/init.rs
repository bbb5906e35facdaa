//! `vault init`: create a vault and cache its key.
use crate::keys::{PassphraseSource, DEFAULT_KERNEL_TTL};
use crate::paths::VaultPaths;
use crate::vault::{Vault, VaultError};
use crate::Exit;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Read the new passphrase from the first line of stdin (else VAULT_PASSPHRASE_FILE, else the terminal).
    #[arg(long)]
    passphrase_stdin: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    if paths.is_initialized() {
        // Say so before asking for a passphrase.
        return Err(VaultError::AlreadyInitialized(paths.dir().display().to_string()).into());
    }
    let passphrase = PassphraseSource::choose(args.passphrase_stdin).read_new()?;
    let (vault, backend) = Vault::init(paths, &passphrase, DEFAULT_KERNEL_TTL)?;
    let keyring = backend.map(|b| b.to_string());
    if args.json {
        super::print_json(&serde_json::json!({
            "vault_id": vault.vault_id,
            "dir": vault.paths.dir(),
            "keyring": keyring,
        }));
    } else {
        println!(
            "Created vault {} in {}",
            vault.vault_id,
            vault.paths.dir().display()
        );
        match keyring {
            Some(k) => println!("The key is cached in the {k}; `vault lock` removes it."),
            None => {
                println!("No keyring was reachable: commands will say `vault unlock` is needed.")
            }
        }
        println!(
            "Back up {} and remember the passphrase: together they are the only way back in.",
            vault.paths.key_file().display()
        );
    }
    Ok(Exit::Ok)
}
