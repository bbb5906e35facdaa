//! `vault export-audit FILE`: the journal as JSON lines in a new 0600 file, checkable anywhere
//! with `vault verify --file FILE` (no key needed).
use crate::audit;
use crate::paths::VaultPaths;
use crate::vault::Vault;
use crate::Exit;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The file to create (never overwritten).
    #[arg(value_name = "FILE")]
    file: PathBuf,
}

pub fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let vault = Vault::open(paths)?;
    let exported = audit::export(vault.store.conn(), &args.file)?;
    println!(
        "Exported {} journal rows to {}.",
        exported.rows,
        args.file.display()
    );
    if let Some(h) = exported.head {
        println!("head: seq {} hash {}", h.seq, hex::encode(h.hash));
    }
    println!(
        "Check it anywhere, without the key: vault verify --file {}",
        args.file.display()
    );
    Ok(Exit::Ok)
}
