//! `vault lock [--forget]`: stop the vault agent (it journals the lock and forgets the key); with
//! `--forget`, also remove the key `--remember` put in the OS keyring. The agent is reached by a
//! signal to the holder of its lock, never through its socket: a moved socket, a relay or a
//! flood of connections cannot make this miss it, and it never says "already locked" while an
//! agent holds the lock.
use crate::agent::holder::Stopped;
use crate::cli::Exit;
use crate::keys::remember;
use crate::paths::VaultPaths;
use crate::vault::Vault;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Also remove the key `vault unlock --remember` left in the OS keyring.
    #[arg(long)]
    forget: bool,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let vault_id = Vault::id_of(&paths)?;
    let stopped = crate::agent::client::stop_running(&paths);
    let forgot = args.forget && remember::forget(&vault_id);
    match (stopped, forgot) {
        (Stopped::Locked(0), _) => outln!("Locked: the vault agent forgot the key and stopped. `vault unlock` opens the vault again."),
        (Stopped::Locked(pid), _) => outln!("Locked: the vault agent (pid {pid}) forgot the key and stopped. `vault unlock` opens the vault again."),
        (Stopped::Killed(pid), _) => outln!("Locked: the vault agent (pid {pid}) did not stop when asked, so it was killed; its key went with it, and the next `vault unlock` closes what it left unfinished."),
        (Stopped::Unreachable, _) => anyhow::bail!("a vault agent holds the vault but could not be told to stop (its pid cannot be known here and its socket did not answer); stop the `vault agent` process yourself, e.g. with `pkill -f 'vault.*agent --handoff'`"),
        (Stopped::NotRunning, true) => outln!("No vault agent was running."),
        (Stopped::NotRunning, false) => outln!("Already locked: no vault agent was running."),
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
