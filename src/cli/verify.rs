//! `vault verify [--json] [--anchor SEQ:HASH]... [--file FILE]`: recompute the journal's chain
//! (in the vault, or in an export with no key at all), check the anchors, print the verdict and
//! the head. Exit 0 intact, 3 not.
use crate::audit::{self, Anchor, Report};
use crate::paths::VaultPaths;
use crate::vault::Vault;
use crate::Exit;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Check an export (`vault export-audit FILE`) instead of the vault: needs no key, keyring
    /// or vault directory.
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// A head kept elsewhere (as this command prints it); the journal must still reach it with
    /// the same hash. Repeatable.
    #[arg(long, value_name = "SEQ:HASH")]
    anchor: Vec<String>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let mut anchors: Vec<Anchor> = args
        .anchor
        .iter()
        .map(|a| audit::parse_anchor(a))
        .collect::<Result<_, _>>()?;
    let given = anchors.len();
    let (report, what) = match &args.file {
        Some(file) => (
            audit::verify_file(file, &anchors)?,
            format!("export {}", file.display()),
        ),
        None => {
            let vault = Vault::open(paths)?;
            anchors.extend(audit::read_anchors(&vault.paths)?);
            let report = audit::verify_store(vault.store.conn(), &vault.vault_id, &anchors)?;
            (report, format!("vault.db of vault {}", vault.vault_id))
        }
    };
    if args.json {
        println!("{}", report.to_json_line());
    } else {
        print_human(&report, &what, given, anchors.len() - given);
    }
    Ok(if report.ok() {
        Exit::Ok
    } else {
        Exit::VerificationFailed
    })
}

fn print_human(report: &Report, what: &str, given: usize, from_file: usize) {
    let anchors = match (given, from_file) {
        (0, 0) => "no anchor to check".to_owned(),
        (g, 0) => format!("{g} anchor(s) given, all matched"),
        (0, f) => format!("{f} anchor(s) from anchors.jsonl, all matched"),
        (g, f) => format!("{g} anchor(s) given and {f} from anchors.jsonl, all matched"),
    };
    match &report.failure {
        None => println!(
            "OK: the journal of {what} is intact: {} rows chained from the genesis; {anchors}.",
            report.rows
        ),
        Some(f) => {
            let at = f.seq.map_or(String::new(), |s| format!(" at seq {s}"));
            println!("FAILED{at}: {}", f.message());
            println!(
                "Rows verified before it: {}. Keep the {what} as evidence (copy it, do not repair it) and compare it with your backups and exports.",
                report.rows
            );
        }
    }
    if let Some(h) = &report.head {
        let label = if report.ok() {
            "head"
        } else {
            "last intact row"
        };
        println!("{label}: seq {} hash {}", h.seq, hex::encode(h.hash));
        if report.ok() {
            println!(
                "Keep this line somewhere else; later, `vault verify --anchor {}:{}` proves nothing up to it changed.",
                h.seq,
                hex::encode(h.hash)
            );
        }
    }
}
