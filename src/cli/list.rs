//! `vault list [--json]`: credentials and their rules, never their secrets.
use super::backend::{unexpected, Backend};
use crate::agent::protocol::{Reply, Request};
use crate::cli::Exit;
use crate::credentials::{Approval, Credential};
use crate::paths::VaultPaths;
use crate::term::escape;
use serde_json::{json, Value};

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    #[command(flatten)]
    passphrase: super::backend::PassphraseArg,
    /// Only this profile.
    #[arg(long, add = clap_complete::engine::ArgValueCandidates::new(super::completions::profile_names))]
    profile: Option<String>,
    /// Print a JSON array.
    #[arg(long)]
    json: bool,
}

/// The public JSON of a credential (the `target` holds no secret by construction). `approval` is
/// the policy that applies: the stored one only if the approver signed this version.
pub(super) fn credential_json(c: &Credential, signed: bool) -> Value {
    let effective = if signed { c.approval } else { Approval::Each };
    json!({
        "id": c.id,
        "name": c.name,
        "profile": c.profile,
        "kind": c.target.kind(),
        "approval": effective.as_str(),
        "signed": signed,
        "stored_approval": c.approval.as_str(),
        "version": c.version,
        "summary": c.target.summary(),
        "target": c.target,
        "created_at": c.created_at,
        "updated_at": c.updated_at,
    })
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let mut backend = Backend::open(&paths, args.passphrase.source())?;
    let creds = match backend.call(Request::Credentials {
        profile: args.profile.clone(),
    })? {
        Reply::Credentials(c) => c,
        other => return Err(unexpected(other)),
    };
    if args.json {
        outln!(
            "{}",
            Value::Array(
                creds
                    .iter()
                    .map(|l| credential_json(&l.credential, l.signed))
                    .collect()
            )
        );
        return Ok(Exit::Ok);
    }
    if creds.is_empty() {
        outln!("No credentials yet. Add one with `vault add http NAME --host HOST --bearer --secret-stdin`.");
        return Ok(Exit::Ok);
    }
    let mut rows = vec![["NAME", "PROFILE", "KIND", "APPROVAL", "TARGET"]
        .map(String::from)
        .to_vec()];
    for l in &creds {
        let c = &l.credential;
        // An unsigned version's stored policy is not in force: say what applies, and why.
        let approval = match (l.signed, c.approval) {
            (true, a) => a.as_str().to_owned(),
            (false, Approval::Each) => "each (unsigned)".to_owned(),
            (false, a) => format!("each (unsigned {}: not in force)", a.as_str()),
        };
        rows.push(vec![
            escape(&c.name),
            escape(&c.profile),
            c.target.kind().to_owned(),
            approval,
            escape(&c.target.summary()),
        ]);
    }
    for line in super::out::table_fit(&rows, super::out::width()) {
        outln!("{line}");
    }
    Ok(Exit::Ok)
}
