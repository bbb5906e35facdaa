//! `vault export-audit FILE`: the journal as JSON lines in a new 0600 file, checkable anywhere
//! with `vault verify --file FILE` (no key needed).
use super::backend::{unexpected, Backend};
use crate::agent::protocol::{Reply, Request};
use crate::paths::VaultPaths;
use crate::Exit;
use anyhow::Context;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    #[command(flatten)]
    passphrase: super::backend::PassphraseArg,
    /// The file to create (never overwritten).
    #[arg(value_name = "FILE")]
    file: PathBuf,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let mut backend = Backend::open(&paths, args.passphrase.source())?;
    // The agent runs in `/`: give it the whole path.
    let file = if args.file.is_absolute() {
        args.file.clone()
    } else {
        std::env::current_dir()
            .context("cannot tell the current directory")?
            .join(&args.file)
    };
    let (rows, head) = match backend.call(Request::Export {
        path: file.display().to_string(),
    })? {
        Reply::Exported { rows, head } => (rows, head),
        other => return Err(unexpected(other)),
    };
    outln!("Exported {rows} journal rows to {}.", args.file.display());
    if let Some((seq, hash)) = head {
        outln!("head: seq {seq} hash {hash}");
    }
    outln!(
        "Check it anywhere, without the key: vault verify --file {}",
        args.file.display()
    );
    Ok(Exit::Ok)
}
