//! `vault resume`: lift the pause switch. It needs the approver's signature, so the passphrase:
//! an agent cannot lift it.
use super::backend::{unexpected, Backend};
use crate::agent::protocol::{Reply, Request};
use crate::cli::Exit;
use crate::keys::PassphraseSource;
use crate::paths::VaultPaths;
use crate::vault::Vault;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Read the passphrase from the first line of stdin (else VAULT_PASSPHRASE_FILE, else the terminal).
    #[arg(long)]
    passphrase_stdin: bool,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let vault_id = Vault::id_of(&paths)?;
    let source = PassphraseSource::choose(args.passphrase_stdin);
    let keys = super::backend::read_keys(&paths, &source, "Vault passphrase: ")?;
    let resume = crate::approvals::sign_resume(&keys.approver, &vault_id);
    let mut backend = Backend::secure(&paths, keys)?;
    match backend.call(Request::Resume { resume })? {
        Reply::Flag(true) => outln!("Resumed: tool calls work again."),
        Reply::Flag(false) => outln!("The vault was not paused."),
        other => return Err(unexpected(other)),
    }
    Ok(Exit::Ok)
}
