//! `vault rm NAME`: remove a credential and its secret.
use crate::credentials;
use crate::paths::VaultPaths;
use crate::vault::Vault;
use crate::Exit;

#[derive(Debug, clap::Args)]
pub struct Args {
    name: String,
    #[arg(long, default_value = "default")]
    profile: String,
}

pub fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let mut vault = Vault::open(paths)?;
    let cred = credentials::remove(&mut vault.store, &args.profile, &args.name)?;
    println!("Removed {} from profile {}.", cred.name, cred.profile);
    Ok(Exit::Ok)
}
