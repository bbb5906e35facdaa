//! `vault unlock`: check the passphrase and start the vault agent, which holds the key. When an
//! agent already holds the vault it says so (its pid, since when, until when) and changes nothing:
//! replacing it would withdraw the calls waiting for a person. `--restart` replaces it on purpose
//! (it answers those calls, and a running `vault approve` follows to the new agent).
use crate::agent::client::Client;
use crate::agent::handoff::{self, IfRunning};
use crate::agent::holder::{self, Holder};
use crate::agent::protocol::{Reply, Request, Role};
use crate::agent::{AgentError, DEFAULT_LIFETIME};
use crate::cli::Exit;
use crate::keys::{remember, PassphraseSource};
use crate::paths::VaultPaths;
use crate::vault::Vault;
use std::time::Duration;

/// How long an agent that holds the vault without answering on its socket is given to let go:
/// one that is stopping does so after its connections' grace period (`[limits]
/// shutdown_grace_seconds`, 5 s by default).
const STOPPING_WAIT: Duration = Duration::from_secs(15);

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Read the passphrase from the first line of stdin (else VAULT_PASSPHRASE_FILE, else the terminal).
    #[arg(long)]
    passphrase_stdin: bool,
    /// How long the agent keeps the key, e.g. 30m, 8h, 2hours (default 8h); `vault lock` ends it
    /// sooner, and so does an hour with no request (`[agent] idle_seconds`; `vault config`).
    #[arg(long = "for", value_name = "DURATION", value_parser = super::parse_duration)]
    ttl: Option<Duration>,
    /// Also keep the key in the OS keyring, so a login unit can start the agent without asking
    /// (any process of yours that can reach that keyring can read it; `vault lock --forget`
    /// removes it).
    #[arg(long)]
    remember: bool,
    /// Replace the running agent with a new one (its waiting calls are answered `withdrawn`; a
    /// running `vault approve` moves to the new agent). Without it, a running agent is left as
    /// it is.
    #[arg(long)]
    restart: bool,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let vault_id = Vault::id_of(&paths)?;
    if !args.restart && holder::holder(&paths) != Holder::Nobody {
        // Before any passphrase: nothing is to be done with it.
        if let Some(said) = already_unlocked(&paths, &args)? {
            return Ok(said);
        }
    }
    let source = PassphraseSource::choose(args.passphrase_stdin);
    let keys = super::backend::read_keys(&paths, &source, "Vault passphrase: ")?;
    let ttl = args.ttl.unwrap_or(DEFAULT_LIFETIME);
    let if_running = if args.restart {
        IfRunning::Restart
    } else {
        IfRunning::Keep
    };
    let status = match handoff::start_agent(&paths, &vault_id, &keys, ttl, if_running) {
        // One started in between (another `vault unlock`): it is left as it is.
        Err(AgentError::Running(pid)) => {
            return already_unlocked(&paths, &args)?.ok_or_else(|| AgentError::Running(pid).into())
        }
        other => other?,
    };
    if args.remember {
        remember::remember(&vault_id, &keys.master, &keys.approver.public())?;
        outln!(
            "The key is also in the {} (`vault lock --forget` removes it).",
            remember::keyring_name()
        );
    }
    outln!(
        "Unlocked vault {vault_id}: agent pid {} listens on {}; it locks at {} (or after {} idle minutes). `vault lock` locks now.",
        status.pid,
        status.socket,
        super::out::local_time(&status.locks_at),
        status.idle_seconds / 60
    );
    super::verify::say_last_anchor(&paths)?;
    team_head(&paths, keys)
}

/// Team mode: the local chain must reach the journal's head the team's OpenBao holds. One that
/// ends before it (an older `vault.db` restored) or disagrees with it is refused: the agent is
/// locked again and the command exits 3, naming the remote head.
fn team_head(paths: &VaultPaths, keys: crate::keys::KeyMaterial) -> anyhow::Result<Exit> {
    let mut backend = super::backend::Backend::secure(paths, keys)?;
    let (seq, hash) = match super::verify::remote_head(&mut backend)? {
        None => return Ok(Exit::Ok),
        Some(super::verify::RemoteCheck::Missing(why)) => {
            outln!("The journal's head in the team's OpenBao was not checked: {why}");
            return Ok(Exit::Ok);
        }
        Some(super::verify::RemoteCheck::Head(seq, hash)) => (seq, hash),
    };
    let report = match backend.call(Request::Verify {
        anchors: vec![(seq, hash.clone())],
    })? {
        Reply::Verify { report, .. } => report,
        other => return Err(super::backend::unexpected(other)),
    };
    let report: crate::wire::journal::VerifyLine = serde_json::from_str(&report)?;
    if report.ok {
        outln!("The journal reaches the head the team's OpenBao holds (seq {seq}).");
        return Ok(Exit::Ok);
    }
    let _ = backend.call(Request::Lock);
    outln!(
        "FAILED: the team's OpenBao holds this vault's journal head at seq {seq} hash {hash}, and the local journal does not reach it ({}): vault.db is an older copy or was rewritten. The vault was locked again; keep vault.db as evidence and restore the latest copy",
        report.reason.as_deref().unwrap_or("?")
    );
    Ok(Exit::VerificationFailed)
}

/// What a `vault unlock` without `--restart` says when an agent already holds the vault: which
/// one, since and until when, that nothing changed (nor the flags it was given), and how to
/// replace it. `None` when that agent, not answering on its socket, was stopping and let go of
/// the vault (the unlock then goes on); an error when it holds on without answering.
fn already_unlocked(paths: &VaultPaths, args: &Args) -> anyhow::Result<Option<Exit>> {
    let unused: Vec<&str> = [(args.ttl.is_some(), "--for"), (args.remember, "--remember")]
        .into_iter()
        .filter_map(|(given, flag)| given.then_some(flag))
        .collect();
    let not_applied = if unused.is_empty() {
        String::new()
    } else {
        format!(" ({} not applied)", unused.join(", "))
    };
    let status = Client::connect(paths, Role::Cli).and_then(|c| match c {
        Some(mut c) => match c.call(Request::Status)? {
            Reply::Status(s) => Ok(Some(s)),
            _ => Ok(None),
        },
        None => Ok(None),
    });
    let why = match status {
        Ok(Some(s)) => {
            outln!(
                "The vault is already unlocked, agent pid {} since {} (it locks at {}); nothing changed{not_applied}. `vault unlock --restart` replaces it (the calls waiting for you are then answered `withdrawn`).",
                s.pid,
                super::out::local_time(&s.started_at),
                super::out::local_time(&s.locks_at)
            );
            return Ok(Some(Exit::Ok));
        }
        // No answer on the socket: an agent that is stopping removed it first.
        Ok(None) if holder::released(paths, STOPPING_WAIT) => return Ok(None),
        Ok(None) => "it does not answer on its socket".to_owned(),
        Err(e) => e.to_string(),
    };
    let pid = match holder::holder(paths) {
        Holder::Pid(p) => format!("pid {p}"),
        _ => "its pid unknown here".into(),
    };
    anyhow::bail!(
        "a vault agent ({pid}) holds the vault, but {why}; nothing changed{not_applied}. Check `vault doctor`, or replace it with `vault unlock --restart`"
    )
}
