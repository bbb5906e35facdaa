//! `vault verify [--json] [--anchor SEQ:HASH]... [--file FILE [--approver-key KEY]]`: recompute
//! the journal's chain (in the vault, through its agent or with the passphrase, held to the
//! vault's approver key; or in an export, held to the approver key the person kept), check the
//! anchors, print the verdict and the head. Exit 0 intact (and, for an export, held to the key),
//! 3 not intact, 5 an export intact but not held to a key (docs/design.md §7, §9).
use super::backend::{unexpected, Backend};
use crate::agent::protocol::{Reply, Request};
use crate::audit::{self, Anchor};
use crate::cli::Exit;
use crate::paths::VaultPaths;
use crate::wire::journal::{HeadLine, VerifyLine};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    #[command(flatten)]
    passphrase: super::backend::PassphraseArg,
    /// Check an export (`vault export-audit FILE`) instead of the vault: needs no key, keyring
    /// or vault directory.
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// The approver public key to hold the export to (64 hex digits, the `ssh-ed25519 …` line, or
    /// a file holding either, as `vault approver show-key` prints it): every signature must be
    /// its, and every action that ran must rest on one. Without it an export is not held (exit 5).
    #[arg(long, value_name = "KEY", requires = "file")]
    approver_key: Option<String>,
    /// A head kept elsewhere (as this command prints it); the journal must still reach it with
    /// the same hash. Repeatable.
    #[arg(long, value_name = "SEQ:HASH")]
    anchor: Vec<String>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let anchors: Vec<Anchor> = args
        .anchor
        .iter()
        .map(|a| audit::parse_anchor(a))
        .collect::<Result<_, _>>()?;
    let given = anchors.len();
    let mut remote = None;
    let key = args
        .approver_key
        .as_deref()
        .map(crate::keys::public::read)
        .transpose()?;
    let (line, from_file, what) = match &args.file {
        Some(file) => (
            audit::verify_file(file, &anchors, key.as_ref())?.to_json_line(),
            0,
            format!("export {}", file.display()),
        ),
        None => {
            let mut backend = Backend::open(&paths, args.passphrase.source())?;
            let what = format!("vault.db of vault {}", backend.vault_id());
            let mut anchors: Vec<(i64, String)> = anchors
                .iter()
                .map(|a| (a.seq, hex::encode(a.hash)))
                .collect();
            // Team mode: the head OpenBao holds is one more anchor the chain must reach.
            remote = remote_head(&mut backend)?;
            if let Some(RemoteCheck::Head(seq, hash)) = &remote {
                anchors.push((*seq, hash.clone()));
            }
            match backend.call(Request::Verify { anchors })? {
                Reply::Verify { report, from_file } => (report, from_file, what),
                other => return Err(unexpected(other)),
            }
        }
    };
    let mut report: VerifyLine = serde_json::from_str(&line)?;
    if let (false, Some(RemoteCheck::Head(seq, hash))) = (report.ok, &remote) {
        report.reason = Some(format!(
            "{}; the team's OpenBao holds this vault's journal head at seq {seq} hash {hash}: vault.db is an older copy or was rewritten",
            report.reason.as_deref().unwrap_or("the chain does not reach it")
        ));
    }
    let ok = report.ok;
    // An export is evidence for someone else: intact is not enough, it must be held to the key.
    // The vault's own journal is held to the key in vault.key.age; rows written before the
    // journal carried signatures are said (`unchecked`), not failed.
    let held = report.held || args.file.is_none();
    if args.json {
        outln!("{}", serde_json::to_string(&report)?);
    } else {
        print_human(&report, &what, given, from_file)?;
        match &remote {
            Some(RemoteCheck::Head(seq, _)) if ok => {
                outln!("The journal reaches the head the team's OpenBao holds (seq {seq}).")
            }
            Some(RemoteCheck::Missing(why)) => {
                outln!("The head in the team's OpenBao was not checked: {why}")
            }
            _ => {}
        }
        if args.file.is_none() {
            say_last_anchor(&paths)?;
        }
    }
    Ok(match (ok, held) {
        (true, true) => Exit::Ok,
        (true, false) => Exit::NotHeld,
        (false, _) => Exit::VerificationFailed,
    })
}

fn print_human(
    report: &VerifyLine,
    what: &str,
    given: usize,
    from_file: usize,
) -> anyhow::Result<()> {
    let ok = report.ok;
    let rows = report.rows;
    let anchors = match (given, from_file) {
        (0, 0) => "no anchor to check".to_owned(),
        (g, 0) => format!("{g} anchor(s) given, all matched"),
        (0, f) => format!("{f} anchor(s) from anchors.jsonl, all matched"),
        (g, f) => format!("{g} anchor(s) given and {f} from anchors.jsonl, all matched"),
    };
    let plural = if report.signatures == 1 { "" } else { "s" };
    let sigs = match (report.signatures, report.signed_from) {
        (0, _) => "no approver signature in it".to_owned(),
        (n, Some(from)) => {
            format!(
                "{n} approver signature{plural} checked (the rows carry them from row {from} on)"
            )
        }
        (n, None) => format!("{n} approver signature{plural} checked"),
    };
    if ok && report.held {
        outln!(
            "OK: the journal of {what} is intact and held to the approver's key: {rows} rows chained from the genesis; {sigs}; {anchors}."
        );
    } else if ok && report.unchecked.is_some() && what.starts_with("vault.db") {
        outln!(
            "OK: the journal of {what} is intact: {rows} rows chained from the genesis; {sigs}; {anchors}."
        );
    } else if ok {
        outln!(
            "NOT HELD: the rows of {what} link from the genesis ({rows} rows; {anchors}), but that alone is no proof: a rewrite re-hashed from its first changed row links too."
        );
    } else {
        let at = report
            .first_bad_seq
            .map_or(String::new(), |s| format!(" at seq {s}"));
        outln!("FAILED{at}: {}", report.reason.as_deref().unwrap_or("?"));
        outln!(
            "Rows verified before it: {rows}. Keep the {what} as evidence (copy it, do not repair it) and compare it with your backups and exports."
        );
    }
    if let Some(unchecked) = &report.unchecked {
        outln!("Not checked: {unchecked}.");
    }
    if let Some(HeadLine { seq, hash }) = &report.head {
        let label = if ok { "head" } else { "last intact row" };
        outln!("{label}: seq {seq} hash {hash}");
        if ok {
            outln!(
                "Keep this line somewhere else; later, `vault verify --anchor {seq}:{hash}` proves nothing up to it changed."
            );
        }
    }
    Ok(())
}

/// The last head anchored in `anchors.jsonl` and when, with why to keep it elsewhere: a process
/// of this user that rolls back `vault.db` and `anchors.jsonl` together leaves a chain that
/// verifies, and only a head kept off this machine shows it.
pub(super) fn say_last_anchor(paths: &VaultPaths) -> anyhow::Result<()> {
    if let Ok(Some((a, ts))) = crate::audit::last_anchor(paths) {
        outln!(
            "Last anchored head: seq {} at {} ({a}). A rollback of vault.db and anchors.jsonl together shows only against a head kept off this machine: `vault verify --anchor {a}`.",
            a.seq,
            super::out::local_time(&ts)
        );
    }
    Ok(())
}

/// What team mode found of the journal's head in OpenBao.
pub(super) enum RemoteCheck {
    /// OpenBao holds this head (seq, hex hash).
    Head(i64, String),
    /// It could not be read (or none was written yet): why, for the person.
    Missing(String),
}

/// The head OpenBao holds for this vault (`None`: not in team mode).
pub(super) fn remote_head(backend: &mut Backend) -> anyhow::Result<Option<RemoteCheck>> {
    match backend.call(Request::OpenBaoHead)? {
        Reply::RemoteHead(v) if !v.logged_in => Ok(None),
        Reply::RemoteHead(v) => Ok(Some(match (v.head, v.error) {
            (Some((seq, hash)), _) => RemoteCheck::Head(seq, hash),
            (None, Some(e)) => RemoteCheck::Missing(e),
            (None, None) => RemoteCheck::Missing(
                "none was written yet (the agent writes it at every anchor and at `vault lock`)"
                    .into(),
            ),
        })),
        other => Err(unexpected(other)),
    }
}
