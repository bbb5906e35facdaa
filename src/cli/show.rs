//! `vault show NAME [--profile P] [--json]`: one credential as a person checks it before trusting
//! it: what it is bound to, the policy in force (and whether the approver signed it), its version
//! and times, the session grants that cover it, and when it last ran an action. Never a secret.
//! Times are local with their offset; `--json` keeps the stored RFC 3339 UTC.
use super::backend::{unexpected, Backend};
use super::mirror::Mirror;
use crate::agent::protocol::{GrantView, Reply, Request};
use crate::audit::{ActionEntry, Activity};
use crate::cli::Exit;
use crate::credentials::Listed;
use crate::paths::VaultPaths;
use crate::term::escape;
use serde_json::json;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The credential's name, as `vault list` shows it.
    #[arg(add = clap_complete::engine::ArgValueCandidates::new(super::completions::credential_names))]
    name: String,
    #[arg(long, default_value = "default", add = clap_complete::engine::ArgValueCandidates::new(super::completions::profile_names))]
    profile: String,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    passphrase: super::backend::PassphraseArg,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let mut backend = Backend::open(&paths, args.passphrase.source())?;
    let listed = match backend.call(Request::Credentials {
        profile: Some(args.profile.clone()),
    })? {
        Reply::Credentials(c) => c,
        other => return Err(unexpected(other)),
    };
    let Some(Listed {
        credential: c,
        signed,
    }) = listed.into_iter().find(|l| l.credential.name == args.name)
    else {
        anyhow::bail!(
            "no credential {:?} in profile {:?}; `vault list` shows them all",
            args.name,
            args.profile
        );
    };
    let grants: Vec<GrantView> = match backend.call(Request::Grants)? {
        Reply::Grants(g) => g.into_iter().filter(|g| g.credential.id == c.id).collect(),
        other => return Err(unexpected(other)),
    };
    let mirror = Mirror::load(&mut backend)?;
    let activity = Activity::load(&mirror.conn)?;
    // Action rows name the credential by name: the latest action that was dispatched with it.
    let last = activity
        .entries
        .iter()
        .rev()
        .find(|e| e.credential.as_deref() == Some(c.name.as_str()) && e.basis.is_some());

    if args.json {
        super::print_json(&json!({
            "credential": super::list::credential_json(&c, signed),
            "grants": grants,
            "last_used": last.map(used_json),
        }))?;
        return Ok(Exit::Ok);
    }
    let policy = match (signed, c.approval) {
        (true, a) => format!("{} (signed by the approver)", a.as_str()),
        (false, crate::credentials::Approval::Each) => "each (unsigned)".to_owned(),
        (false, a) => format!("each: the stored {} is unsigned, not in force", a.as_str()),
    };
    outln!(
        "{} ({}), profile {}, version {}",
        escape(&c.name),
        c.target.kind(),
        escape(&c.profile),
        c.version
    );
    outln!("  target     {}", escape(&c.target.summary()));
    outln!("  approval   {policy}");
    outln!(
        "  added      {}   changed {}",
        super::out::local_time(&c.created_at),
        super::out::local_time(&c.updated_at)
    );
    match last {
        Some(e) => outln!(
            "  last used  {}: {} ({})",
            super::out::local_time(&e.started),
            escape(e.summary.as_deref().unwrap_or("?")),
            e.state
        ),
        None => outln!("  last used  never"),
    }
    if grants.is_empty() {
        outln!("  grants     none in force");
    }
    for g in &grants {
        outln!(
            "  grant      {} {} until {} (used {} time{}); `vault grants revoke {}` ends it",
            g.id,
            escape(&crate::policy::scope::describe(&g.scope)),
            super::out::local_time(&g.expires_at),
            g.uses,
            if g.uses == 1 { "" } else { "s" },
            g.id
        );
    }
    Ok(Exit::Ok)
}

fn used_json(e: &ActionEntry) -> serde_json::Value {
    json!({
        "time": e.started,
        "action_id": e.action_id,
        "tool": e.tool,
        "summary": e.summary,
        "state": e.state,
    })
}
