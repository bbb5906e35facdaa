//! `vault sessions [--json]`: each MCP session (client name and version, parent process, start
//! and end, actions by state), as a projection of the journal. Agent-derived text (the client's
//! self-reported name and version) is printed through `term::escape`.
use super::backend::Backend;
use super::mirror::Mirror;
use crate::audit::{Activity, SessionSummary};
use crate::cli::Exit;
use crate::paths::VaultPaths;
use crate::term::escape;
use serde_json::{json, Value};

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    #[command(flatten)]
    passphrase: super::backend::PassphraseArg,
    /// Print a JSON array.
    #[arg(long)]
    json: bool,
}

fn session_json(s: &SessionSummary) -> Value {
    json!({
        "session": s.id,
        "client": {"name": s.client_name, "version": s.client_version},
        "parent": {"pid": s.parent_pid, "exe": s.parent_exe},
        "profile": s.profile,
        "protocol_version": s.protocol_version,
        "contained": s.contained,
        "started": s.started,
        "ended": s.ended,
        "end_reason": s.end_reason,
        "counts": s.counts,
    })
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let mut backend = Backend::open(&paths, args.passphrase.source())?;
    let mirror = Mirror::load(&mut backend)?;
    let activity = Activity::load(&mirror.conn)?;
    if args.json {
        outln!(
            "{}",
            Value::Array(activity.sessions.iter().map(session_json).collect())
        );
        return Ok(Exit::Ok);
    }
    if activity.sessions.is_empty() {
        outln!("No MCP sessions yet: each `vault mcp` run shows here.");
        return Ok(Exit::Ok);
    }
    let mut rows = vec![[
        "SESSION",
        "CLIENT",
        "CONTAINED",
        "PARENT",
        "STARTED (local)",
        "ENDED",
        "COUNTS",
    ]
    .map(String::from)
    .to_vec()];
    for s in &activity.sessions {
        let client = format!(
            "{} {}",
            escape(s.client_name.as_deref().unwrap_or("?")),
            escape(s.client_version.as_deref().unwrap_or(""))
        );
        let parent = match (s.parent_pid, s.parent_exe.as_deref()) {
            (Some(pid), Some(exe)) => format!("{pid} {}", escape(exe)),
            (Some(pid), None) => pid.to_string(),
            (None, Some(exe)) => escape(exe),
            (None, None) => "-".into(),
        };
        let ended = match (&s.ended, &s.end_reason) {
            (Some(t), Some(r)) => format!("{} ({})", escape(&super::out::local_time(t)), escape(r)),
            (Some(t), None) => escape(&super::out::local_time(t)),
            (None, _) => "running or cut off".into(),
        };
        let counts: Vec<String> = s.counts.iter().map(|(k, n)| format!("{k}={n}")).collect();
        rows.push(vec![
            escape(&s.id),
            client.trim().to_owned(),
            // Marked by the channel it came on (`vault run`'s relay), never by the client.
            if s.contained { "yes" } else { "no" }.to_owned(),
            parent,
            escape(&super::out::local_time(&s.started)),
            ended,
            if counts.is_empty() {
                "-".into()
            } else {
                counts.join(" ")
            },
        ]);
    }
    for line in super::out::table_fit(&rows, super::out::width()) {
        outln!("{line}");
    }
    Ok(Exit::Ok)
}
