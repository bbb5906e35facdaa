//! `vault pending [--json]`: what waits for a decision. Through the agent, no passphrase needed.
//! Agent-derived text (client name, summary) is printed through `term::escape`.
use super::backend::{unexpected, Backend};
use crate::agent::protocol::{Reply, Request};
use crate::cli::Exit;
use crate::paths::VaultPaths;
use crate::term::escape;
use serde_json::{json, Value};

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    #[command(flatten)]
    passphrase: super::backend::PassphraseArg,
    /// Print a JSON array.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let mut backend = Backend::open(&paths, args.passphrase.source())?;
    let pending = match backend.call(Request::Pending)? {
        Reply::Pending(p) => p,
        other => return Err(unexpected(other)),
    };
    if args.json {
        let items: Vec<Value> = pending
            .iter()
            .map(|v| (&v.action, v.session.as_ref().is_some_and(|s| s.contained)))
            .map(|(a, contained)| json!({
                "action_id": a.id, "tool": a.tool, "credential": a.credential_name, "profile": a.profile,
                "client": a.client, "summary": a.summary, "hash": a.action_hash,
                "created_at": a.created_at, "expires_at": a.expires_at, "contained": contained,
            }))
            .collect();
        outln!("{}", Value::Array(items));
        return Ok(Exit::Ok);
    }
    if pending.is_empty() {
        outln!("Nothing waits for a decision.");
        return Ok(Exit::Ok);
    }
    for a in pending.iter().map(|v| &v.action) {
        outln!(
            "{}  {}  {}  hash {}  expires {}",
            a.id,
            escape(&a.client),
            escape(&a.summary),
            &a.action_hash[..12],
            super::out::local_time(&a.expires_at)
        );
    }
    outln!("Decide with `vault approve`.");
    Ok(Exit::Ok)
}
