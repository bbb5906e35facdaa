//! `vault agent`: the custody process. `vault unlock` / `vault approve` / `vault init` start it
//! detached with the key on an inherited channel (`--handoff`, internal); a login unit runs it
//! with `--foreground`, unlocking from the OS keyring (`vault unlock --remember` put the key there).
use crate::agent::{self, handoff, socket, Start};
use crate::cli::Exit;
use crate::paths::VaultPaths;
use crate::vault::Vault;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Run in the foreground for a login unit (systemd, launchd), with the key `vault unlock
    /// --remember` left in the OS keyring.
    #[arg(long, conflicts_with = "handoff")]
    foreground: bool,
    /// Internal: the key arrives on stdin from `vault unlock`.
    #[arg(long, hide = true)]
    handoff: bool,
    /// With --foreground: lock after this long, e.g. 8h (default 8h).
    #[arg(long = "for", value_name = "DURATION", value_parser = super::parse_duration)]
    ttl: Option<Duration>,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    if !args.handoff && !args.foreground {
        anyhow::bail!("`vault agent` is started by `vault unlock`; run that instead (or `vault agent --foreground` from a login unit, after `vault unlock --remember`)");
    }
    // Before any key is read.
    let hardening = agent::harden();
    if args.handoff {
        let _ = rustix::process::setsid();
        let start = match handoff::receive(&paths) {
            Ok(s) => s,
            Err(e) => {
                handoff::answer(Err(&e));
                return Err(e.into());
            }
        };
        agent::run(start, hardening, handoff::answer)?;
        return Ok(Exit::Ok);
    }
    let vault_id = Vault::id_of(&paths)?;
    let remembered = crate::keys::remember::recall(&vault_id)?.ok_or_else(|| {
        anyhow::anyhow!("the OS keyring holds no key for vault {vault_id}; run `vault unlock --remember` once in a terminal")
    })?;
    let start = Start {
        socket: socket::socket_path(&vault_id),
        paths,
        master: remembered.master,
        trust: crate::approvals::Trust {
            vault_id,
            approver: remembered.approver,
        },
        lifetime: args.ttl.unwrap_or(agent::DEFAULT_LIFETIME),
    };
    agent::run(start, hardening, |r| match r {
        Ok(s) => tracing::info!(pid = s.pid, socket = %s.socket, "vault agent ready"),
        Err(e) => tracing::error!("vault agent failed: {e}"),
    })?;
    Ok(Exit::Ok)
}
