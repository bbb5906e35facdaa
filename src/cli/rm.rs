//! `vault rm NAME`: remove a credential and its secret.
use super::backend::{unexpected, Backend};
use crate::agent::protocol::{Reply, Request};
use crate::keys::PassphraseSource;
use crate::paths::VaultPaths;
use crate::Exit;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    name: String,
    #[arg(long, default_value = "default")]
    profile: String,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let mut backend = Backend::open(&paths, PassphraseSource::choose(false))?;
    let cred = match backend.call(Request::RemoveCredential {
        profile: args.profile,
        name: args.name,
    })? {
        Reply::Credential(c) => c,
        other => return Err(unexpected(other)),
    };
    outln!("Removed {} from profile {}.", cred.name, cred.profile);
    Ok(Exit::Ok)
}
