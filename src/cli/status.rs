//! `vault status [--json]`: the vault at a glance, without the passphrase and without prompting:
//! whether the agent is up (and until when) or the vault is locked, the pause switch, how many
//! actions wait, how many session grants are in force, whether the approval PIN is set, and the
//! last anchored head of the journal (`anchors.jsonl`, readable with no key). A locked vault shows
//! its store's part only when the passphrase is given without a terminal (`--passphrase-stdin`
//! or `VAULT_PASSPHRASE_FILE`). Exit 0 when the agent is up and not paused, 4 when locked or
//! paused (scripts can wait on it), 1 on an error.
use super::backend::{unexpected, Backend, PassphraseArg};
use crate::agent::client::Client;
use crate::agent::protocol::{AgentStatus, Reply, Request, Role, StoreStatus};
use crate::cli::Exit;
use crate::keys::PassphraseSource;
use crate::paths::VaultPaths;
use crate::vault::Vault;
use serde_json::json;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    passphrase: PassphraseArg,
}

/// The store's part: pause, queue, grants, PIN.
struct Store {
    status: StoreStatus,
    grants: usize,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let vault_id = Vault::id_of(&paths)?;
    let mut agent: Option<AgentStatus> = None;
    let mut store: Option<Store> = None;
    let mut team: Option<crate::agent::protocol::OpenBaoView> = None;
    if let Some(mut c) = Client::connect(&paths, Role::Cli)? {
        let s = match c.call(Request::Status)? {
            Reply::Status(s) => s,
            other => return Err(unexpected(other)),
        };
        let grants = match c.call(Request::Grants)? {
            Reply::Grants(g) => g.len(),
            other => return Err(unexpected(other)),
        };
        store = s.store.clone().map(|status| Store { status, grants });
        agent = Some(s);
        if let Reply::OpenBao(v) = c.call(Request::OpenBaoStatus)? {
            team = v.login.is_some().then_some(v);
        }
    } else if args.passphrase.source() != PassphraseSource::Terminal {
        let mut b = Backend::open(&paths, args.passphrase.source())?;
        let status = b.store_status()?;
        let grants = match b.call(Request::Grants)? {
            Reply::Grants(g) => g.len(),
            other => return Err(unexpected(other)),
        };
        store = Some(Store { status, grants });
    }
    let anchor = crate::audit::last_anchor(&paths)?;
    let paused = store.as_ref().and_then(|s| s.status.paused.clone());
    let code = if agent.is_some() && paused.is_none() {
        Exit::Ok
    } else {
        Exit::LockedOrPaused
    };

    if args.json {
        let mut v = json!({
            "vault_dir": paths.dir().display().to_string(),
            "vault_id": vault_id,
            "agent": agent.as_ref().map_or(json!({"state": "locked"}), |a| json!({
                "state": "up",
                "pid": a.pid,
                "started_at": a.started_at,
                "locks_at": a.locks_at,
                "idle_seconds": a.idle_seconds,
                "connections": a.connections,
            })),
            "anchor": anchor.as_ref().map(|(a, ts)| json!({
                "seq": a.seq, "hash": hex::encode(a.hash), "ts": ts,
            })),
        });
        if let Some(s) = &store {
            v["paused"] = json!(s.status.paused);
            v["pending"] = json!(s.status.pending);
            v["grants"] = json!(s.grants);
            v["pin_set"] = json!(s.status.pin_set);
            v["journal_head"] = json!(s.status.journal_head);
        }
        if let Some(t) = &team {
            v["openbao"] = serde_json::to_value(t)?;
        }
        super::print_json(&v)?;
        return Ok(code);
    }

    outln!("vault    {} ({vault_id})", paths.dir().display());
    match &agent {
        Some(a) => outln!(
            "agent    up: pid {}, locks at {} (or after {} s idle), {} connection(s)",
            a.pid,
            super::out::local_time(&a.locks_at),
            a.idle_seconds,
            a.connections
        ),
        None => outln!("agent    locked: no agent holds the key; `vault unlock` starts it"),
    }
    match &store {
        Some(s) => {
            match &s.status.paused {
                None => outln!("pause    off"),
                Some(why) => outln!(
                    "pause    PAUSED ({}): every tool call fails; `vault resume` lifts it",
                    crate::term::escape(why)
                ),
            }
            outln!(
                "waiting  {} action(s){}",
                s.status.pending,
                if s.status.pending > 0 {
                    "; `vault approve` decides them"
                } else {
                    ""
                }
            );
            outln!(
                "grants   {} in force{}",
                s.grants,
                if s.grants > 0 {
                    "; `vault grants` lists them"
                } else {
                    ""
                }
            );
            outln!(
                "PIN      {}",
                if s.status.pin_set {
                    "set"
                } else {
                    "not set: no card can be approved until `vault pin` sets it"
                }
            );
            outln!("journal  head seq {}", s.status.journal_head);
        }
        None => outln!(
            "store    not read while locked (no prompt here): give the passphrase with --passphrase-stdin or VAULT_PASSPHRASE_FILE"
        ),
    }
    if let Some(t) = &team {
        let address = t.login.as_ref().map_or("?", |l| l.address.as_str());
        match &t.last_error {
            None => outln!(
                "openbao  {}: {}",
                crate::term::escape(address),
                t.token.as_deref().unwrap_or("")
            ),
            Some(e) => outln!(
                "openbao  {}: the last call FAILED: {}",
                crate::term::escape(address),
                crate::term::escape(e)
            ),
        }
    }
    match &anchor {
        Some((a, ts)) => outln!(
            "anchor   seq {} {} at {}; keep it off this machine to catch a rollback",
            a.seq,
            hex::encode(a.hash),
            super::out::local_time(ts)
        ),
        None => outln!("anchor   none yet"),
    }
    Ok(code)
}
