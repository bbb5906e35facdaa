//! `vault export-audit FILE`: the journal as JSON lines in a new 0600 file (or on stdout for
//! `-`), checkable anywhere with `vault verify --file FILE` (no key needed).
use super::backend::{unexpected, Backend};
use crate::agent::protocol::{Reply, Request};
use crate::cli::Exit;
use crate::paths::VaultPaths;
use anyhow::Context;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    #[command(flatten)]
    passphrase: super::backend::PassphraseArg,
    /// The file to create (never overwritten), or `-` for stdout.
    #[arg(value_name = "FILE")]
    file: PathBuf,
}

/// `-`: the rows on stdout (through a copy of the journal read from the agent or the store), the
/// summary on stderr.
fn to_stdout(backend: &mut Backend) -> anyhow::Result<Exit> {
    let mirror = super::mirror::Mirror::load(backend)?;
    let mut out = std::io::stdout().lock();
    let exported = crate::audit::export_to(&mirror.conn, &mut out, std::path::Path::new("-"))?;
    drop(out);
    super::out::note(format_args!(
        "Exported {} journal rows to stdout.",
        exported.rows
    ));
    if let Some(h) = exported.head {
        super::out::note(format_args!(
            "head: seq {} hash {}",
            h.seq,
            hex::encode(h.hash)
        ));
    }
    Ok(Exit::Ok)
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let mut backend = Backend::open(&paths, args.passphrase.source())?;
    if args.file.as_os_str() == "-" {
        return to_stdout(&mut backend);
    }
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
        "Check it anywhere with the approver's public key alone (`vault approver show-key` prints it): vault verify --file {} --approver-key KEY",
        args.file.display()
    );
    Ok(Exit::Ok)
}
