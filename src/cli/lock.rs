//! `vault lock [--forget]`: stop the vault agent (it journals the lock and forgets the key); with
//! `--forget`, also remove the key `--remember` put in the OS keyring.
use crate::keys::remember;
use crate::paths::VaultPaths;
use crate::vault::Vault;
use crate::Exit;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Also remove the key `vault unlock --remember` left in the OS keyring.
    #[arg(long)]
    forget: bool,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let vault_id = Vault::id_of(&paths)?;
    let legacy = remember::remove_legacy(&vault_id);
    let socket = crate::agent::socket::socket_path(&vault_id);
    let stopped = crate::agent::client::stop_running(&paths, &socket);
    let forgot = args.forget && remember::forget(&vault_id);
    match (stopped, legacy || forgot) {
        (true, _) => outln!("Locked: the vault agent forgot the key and stopped. `vault unlock` opens the vault again."),
        (false, true) => outln!("No vault agent was running."),
        (false, false) => outln!("Already locked: no vault agent was running."),
    }
    if legacy {
        outln!("Removed the key an earlier version left in the kernel keyring.");
    }
    if forgot {
        outln!("Removed the key from the {}.", remember::keyring_name());
    } else if args.forget {
        outln!(
            "The {} held no key for this vault.",
            remember::keyring_name()
        );
    }
    Ok(Exit::Ok)
}
