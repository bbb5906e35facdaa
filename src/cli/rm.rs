//! `vault rm NAME`: remove a credential and its secret, with the approver's signed removal of the
//! version this command read over the encrypted channel.
use super::backend::{unexpected, Backend};
use crate::agent::protocol::{Reply, Request};
use crate::cli::Exit;
use crate::credentials::Credential;
use crate::paths::VaultPaths;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    #[command(flatten)]
    passphrase: super::backend::PassphraseArg,
    #[arg(add = clap_complete::engine::ArgValueCandidates::new(super::completions::credential_names))]
    name: String,
    #[arg(long, default_value = "default", add = clap_complete::engine::ArgValueCandidates::new(super::completions::profile_names))]
    profile: String,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let mut backend = Backend::verified(&paths, args.passphrase.source())?;
    let current = current(&mut backend, &args.profile, &args.name)?;
    let removal =
        crate::credentials::sign_removal(super::approver(&backend)?, backend.vault_id(), &current);
    let cred = match backend.call(Request::RemoveCredential {
        profile: args.profile,
        name: args.name,
        removal,
    })? {
        Reply::Credential(c) => c,
        other => return Err(unexpected(other)),
    };
    outln!("Removed {} from profile {}.", cred.name, cred.profile);
    Ok(Exit::Ok)
}

/// The credential `profile`/`name` as the vault holds it now.
pub(super) fn current(
    backend: &mut Backend,
    profile: &str,
    name: &str,
) -> anyhow::Result<Credential> {
    match backend.call(Request::Credentials {
        profile: Some(profile.to_owned()),
    })? {
        Reply::Credentials(all) => all
            .into_iter()
            .map(|l| l.credential)
            .find(|c| c.name == name)
            .ok_or_else(|| {
                crate::credentials::CredentialError::NotFound {
                    profile: profile.to_owned(),
                    name: name.to_owned(),
                }
                .into()
            }),
        other => Err(unexpected(other)),
    }
}
