//! `vault pause [--reason R]`: the kill switch. Every tool call fails at once and every waiting
//! action is denied. Anyone may pull it; lifting it (`vault resume`) needs the passphrase.
use super::backend::{unexpected, Backend};
use crate::agent::protocol::{Reply, Request};
use crate::keys::PassphraseSource;
use crate::paths::VaultPaths;
use crate::Exit;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Why (shown to agents and in the journal).
    #[arg(long, default_value = "paused by the person")]
    reason: String,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let mut backend = Backend::open(&paths, PassphraseSource::choose(false))?;
    let denied = match backend.call(Request::Pause {
        reason: args.reason,
    })? {
        Reply::Count(n) => n,
        other => return Err(unexpected(other)),
    };
    outln!("Paused: every tool call now fails; {denied} waiting action(s) denied. `vault resume` lifts it.");
    Ok(Exit::Ok)
}
