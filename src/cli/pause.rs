//! `vault pause [--reason R]`: the kill switch. Every tool call fails at once and every waiting
//! action is denied. Anyone may pull it; lifting it (`vault resume`) needs the passphrase.
use crate::approvals;
use crate::paths::VaultPaths;
use crate::vault::Vault;
use crate::Exit;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Why (shown to agents and in the journal).
    #[arg(long, default_value = "paused by the person")]
    reason: String,
}

pub fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let mut vault = Vault::open(paths)?;
    let denied = approvals::pause(&mut vault.store, &args.reason)?;
    println!("Paused: every tool call now fails; {denied} waiting action(s) denied. `vault resume` lifts it.");
    Ok(Exit::Ok)
}
