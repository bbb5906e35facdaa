//! `vault log [--json] [--session S] [--since T] [--follow | --reverse]`: what each agent did, as
//! a projection of the journal: time, client, tool, credential, state, duration, why it ran (the
//! basis its dispatch row names: `card` and the decision, `grant` and its id, or `policy` and
//! which), target summary and why it was refused (the reason of its last row), under a header, oldest first (newest with --reverse), the summary cut in the middle to the
//! terminal's width.
//! Text lines print agent-derived fields through `term::escape`; `--json` is JSON-escaped.
use super::backend::Backend;
use super::mirror::Mirror;
use crate::approvals::{State, Tone};
use crate::audit::{ActionEntry, Activity};
use crate::cli::Exit;
use crate::paths::VaultPaths;
use crate::term::escape;
use crate::wire::journal::Basis;
use crate::wire::ApprovalMethod;
use serde_json::json;
use std::io::IsTerminal;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    #[command(flatten)]
    passphrase: super::backend::PassphraseArg,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    /// Only this MCP session (an id as `vault sessions` prints it).
    #[arg(long, value_name = "S")]
    session: Option<String>,
    /// Only what changed since T: a UTC time (2026-11-30T13:00:00Z) or an age (90s, 10m, 2h, 3d).
    #[arg(long, value_name = "T")]
    since: Option<String>,
    /// Keep running and print entries as they change (Ctrl-C to stop).
    #[arg(long)]
    follow: bool,
    /// Newest first (not with --follow).
    #[arg(long, conflicts_with = "follow")]
    reverse: bool,
}

/// The RAN ON column's width: a terminal's table shows ids cut to their first digits; piped,
/// every character of the longest (`script dec_` and 32 hex digits) fits, so the columns stay
/// aligned.
fn ran_on_width(width: Option<usize>) -> usize {
    if width.is_some() {
        13
    } else {
        43
    }
}

/// The column titles of `entry_line`.
fn header(width: Option<usize>) -> String {
    format!(
        "{:<26}  {:<14}  {:<12}  {:<14}  {:<18}  {:>7}  {:<w$}  {}",
        "TIME (local)",
        "CLIENT",
        "TOOL",
        "CREDENTIAL",
        "STATE",
        "TOOK",
        "RAN ON",
        "WHAT",
        w = ran_on_width(width)
    )
}

/// Why a dispatched action ran, as JSON: `{"kind":"card","decision":"dec_…","method":"pin"}`
/// (a person's signed decision: `method` says how, `passphrase` being the scripted
/// `vault approve --id`), `{"kind":"grant","grant":"grt_…"}` or
/// `{"kind":"policy","policy":"never"}`.
fn basis_json(b: &Basis, method: Option<ApprovalMethod>) -> serde_json::Value {
    match b {
        Basis::Decision { decision, .. } => json!({"kind": "card", "decision": decision,
            "method": method.map(ApprovalMethod::as_str)}),
        Basis::Grant { grant, .. } => json!({"kind": "grant", "grant": grant}),
        Basis::Policy { policy } => json!({"kind": "policy", "policy": policy.as_str()}),
    }
}

/// Why a dispatched action ran, as text: `card dec_…` (the PIN or a key on a card), `script
/// dec_…` (the passphrase: `vault approve --id`), `grant grt_…`, `policy writes`, or `-`;
/// `short` (a terminal's 13 columns): the id's first hex digits only (`grant 3f57a1b`).
fn basis_text(b: Option<&Basis>, method: Option<ApprovalMethod>, short: bool) -> String {
    let id = |kind: &str, id: &str| {
        if short {
            let hex = id.split_once('_').map_or(id, |(_, h)| h);
            let keep = 12 - kind.len();
            format!("{kind} {}", hex.chars().take(keep).collect::<String>())
        } else {
            format!("{kind} {id}")
        }
    };
    match b {
        Some(Basis::Decision { decision, .. }) if method == Some(ApprovalMethod::Passphrase) => {
            id("script", decision)
        }
        Some(Basis::Decision { decision, .. }) => id("card", decision),
        Some(Basis::Grant { grant, .. }) => id("grant", grant),
        Some(Basis::Policy { policy }) => format!("policy {}", policy.as_str()),
        None => "-".into(),
    }
}

/// `--since` as a journal timestamp, so it compares as a string.
fn parse_since(s: &str) -> anyhow::Result<String> {
    if let Ok(ts) = s.parse::<jiff::Timestamp>() {
        return Ok(crate::time::format_utc(ts));
    }
    let age = super::parse_age(s).map_err(|_| {
        anyhow::anyhow!("--since {s:?} is neither a UTC time like 2026-11-30T13:00:00Z nor an age like 90s, 10m, 2h, 2hours or 3d")
    })?;
    let ms = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
    let ts = jiff::Timestamp::from_millisecond(crate::time::now_ms().saturating_sub(ms))
        .unwrap_or(jiff::Timestamp::MIN);
    Ok(crate::time::format_utc(ts))
}

struct Style {
    colour: bool,
}

impl Style {
    fn state(&self, state: &str) -> String {
        // `rejected` (a refused call) is not an action state.
        let code = match State::parse(state).map(State::tone) {
            Some(Tone::Done) => "32",
            Some(Tone::InProgress) => "33",
            Some(Tone::Uncertain) => "35",
            Some(Tone::Failed) => "31",
            None if state == "rejected" => "31",
            None => "",
        };
        if self.colour && !code.is_empty() {
            format!("\x1b[{code}m{state:<18}\x1b[0m")
        } else {
            format!("{state:<18}")
        }
    }
}

fn duration(ms: Option<i64>) -> String {
    match ms {
        None => "-".into(),
        Some(ms) if ms < 1000 => format!("{ms}ms"),
        Some(ms) if ms < 60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        Some(ms) => format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60),
    }
}

fn entry_json(a: &Activity, e: &ActionEntry) -> serde_json::Value {
    let client = a
        .session_of(e)
        .map(|s| json!({"name": s.client_name, "version": s.client_version}));
    json!({
        "time": e.started,
        "updated": e.updated,
        "seq": e.last_seq,
        "session": e.session,
        "client": client,
        "action_id": e.action_id,
        "tool": e.tool,
        "credential": e.credential,
        "summary": e.summary,
        "state": e.state,
        "code": e.code,
        "duration_ms": e.duration_ms,
        "basis": e.basis.as_ref().map(|b| basis_json(b, e.method)),
        "reason": e.reason,
        "contained": a.session_of(e).is_some_and(|s| s.contained),
    })
}

fn entry_line(a: &Activity, e: &ActionEntry, style: &Style, width: Option<usize>) -> String {
    let client = a
        .session_of(e)
        .and_then(|s| s.client_name.as_deref().map(escape))
        .unwrap_or_else(|| "-".into());
    // Cells are cut only to fit a terminal (or $COLUMNS); piped, every character is kept.
    let cell = |s: String, w: usize| match width {
        Some(_) => super::out::middle(&s, w),
        None => s,
    };
    let head = format!(
        "{}  {:<14}  {:<12}  {:<14}  ",
        super::out::local_time(&e.started),
        cell(client, 14),
        cell(escape(e.tool.as_deref().unwrap_or("-")), 12),
        cell(escape(e.credential.as_deref().unwrap_or("-")), 14),
    );
    let why = escape(&basis_text(e.basis.as_ref(), e.method, width.is_some()));
    // The summary (and a refusal's reason) takes what is left of the width (its middle cut),
    // at least 20 characters.
    let mut what = escape(e.summary.as_deref().unwrap_or(""));
    let refused = State::parse(&e.state).is_some_and(|s| s.is_terminal() && s != State::Completed);
    if let (Some(reason), true) = (&e.reason, refused) {
        what += &format!(" ({})", escape(reason));
    }
    let used = head.chars().count() + 18 + 2 + 7 + 2 + ran_on_width(width) + 2;
    let what = match width {
        Some(w) => super::out::middle(&what, w.saturating_sub(used).max(20)),
        None => what,
    };
    format!(
        "{head}{}  {:>7}  {why:<w$}  {what}",
        style.state(&escape(&e.state)),
        duration(e.duration_ms),
        w = ran_on_width(width)
    )
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let since = args.since.as_deref().map(parse_since).transpose()?;
    let mut backend = Backend::open(&paths, args.passphrase.source())?;
    let mut mirror = Mirror::load(&mut backend)?;
    let mut activity = Activity::load(&mirror.conn)?;
    let style = Style {
        colour: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    let keep = |e: &ActionEntry| {
        args.session
            .as_deref()
            .is_none_or(|s| e.session.as_deref() == Some(s))
            && since.as_deref().is_none_or(|t| e.updated.as_str() >= t)
    };
    let width = super::out::width();
    let print = |a: &Activity, e: &ActionEntry| -> anyhow::Result<()> {
        if args.json {
            outln!("{}", entry_json(a, e));
        } else {
            outln!("{}", entry_line(a, e, &style, width));
        }
        Ok(())
    };
    if let Some(s) = args.session.as_deref() {
        if !activity.sessions.iter().any(|x| x.id == s) {
            anyhow::bail!("the journal has no session {s:?}; `vault sessions` lists them");
        }
    }
    let mut shown: Vec<&ActionEntry> = activity.entries.iter().filter(|e| keep(e)).collect();
    if shown.is_empty() && !args.json && !args.follow {
        outln!("No activity yet: actions and rejected calls from `vault mcp` sessions show here.");
        return Ok(Exit::Ok);
    }
    if !args.json {
        outln!("{}", header(width));
    }
    if args.reverse {
        shown.reverse();
    }
    for e in shown {
        print(&activity, e)?;
    }
    if !args.follow {
        return Ok(Exit::Ok);
    }
    loop {
        // The agent answers as soon as a row lands, or after 10 s with none: each answer is
        // also the sign it is alive (a call not answered within that and its deadline ends the
        // follow with what to check, rather than waiting on a dead or silent agent).
        if mirror.fetch(&mut backend, 10_000)? == 0 {
            if !backend.is_agent() {
                std::thread::sleep(std::time::Duration::from_millis(300));
            }
            continue;
        }
        for i in activity.update(&mirror.conn)? {
            let e = &activity.entries[i];
            if keep(e) {
                print(&activity, e)?;
            }
        }
    }
}
