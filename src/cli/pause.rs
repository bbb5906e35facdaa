//! `vault pause [--reason R]`: the kill switch. Every tool call fails at once and every waiting
//! action is denied. Anyone may pull it; lifting it (`vault resume`) needs the passphrase. It goes
//! through the agent's socket when the listener there is the agent (the holder of its lock), and
//! otherwise (a moved or relayed socket, a flood of connections) by a signal to that holder.
use super::backend::{unexpected, Backend};
use crate::agent::client::Client;
use crate::agent::holder::{self, Holder, Order};
use crate::agent::protocol::{Reply, Request, Role};
use crate::cli::Exit;
use crate::paths::VaultPaths;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    #[command(flatten)]
    passphrase: super::backend::PassphraseArg,
    /// Why (shown to agents and in the journal).
    #[arg(long, default_value = "paused by the person")]
    reason: String,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    crate::vault::Vault::id_of(&paths)?;
    let through_socket = holder::holder(&paths) != Holder::Nobody;
    if through_socket {
        match by_request(&paths, &args.reason) {
            Ok(denied) => {
                outln!("Paused: every tool call now fails; {denied} waiting action(s) denied. `vault resume` lifts it.");
                return Ok(Exit::Ok);
            }
            Err(e) => {
                tracing::warn!("the agent's socket could not be used ({e:#}); pausing by signal")
            }
        }
    }
    match holder::holder(&paths) {
        Holder::Pid(pid) if holder::send(pid, Order::Pause) => {
            outln!("Paused by signal to the vault agent (pid {pid}): every tool call now fails and every waiting action is denied (reason: \"vault pause (by signal)\"). `vault resume` lifts it.");
            Ok(Exit::Ok)
        }
        Holder::Nobody => {
            // Locked: with the passphrase the switch is pulled in the store itself.
            let mut backend = Backend::open(&paths, args.passphrase.source())?;
            match backend.call(Request::Pause {
                reason: args.reason,
            })? {
                Reply::Count(_) => {
                    outln!("Paused: every tool call will fail until `vault resume` lifts it.");
                    Ok(Exit::Ok)
                }
                other => Err(unexpected(other)),
            }
        }
        _ => anyhow::bail!("a vault agent holds the vault but could be reached neither through its socket nor by signal; `vault lock` stops it"),
    }
}

/// The pause through the agent's socket (only if the listener there is the agent).
fn by_request(paths: &VaultPaths, reason: &str) -> anyhow::Result<usize> {
    let mut client = Client::connect(paths, Role::Cli)?
        .ok_or_else(|| anyhow::anyhow!("no vault agent answers on its socket"))?;
    match client.call(Request::Pause {
        reason: reason.to_owned(),
    })? {
        Reply::Count(n) => Ok(n),
        other => Err(unexpected(other)),
    }
}
