//! `vault config [--json | --defaults]`: the effective configuration, every key with its value, unit and
//! source (the default or `config.toml`), and where the running agent read something else when
//! it started ("changed since the agent started: `vault unlock` applies it"). Prints no secret;
//! needs no passphrase. `--sign` signs `[network] allow` with the approver key (the passphrase),
//! so `vault run` lets those hosts through without a card.
use crate::agent::client::Client;
use crate::agent::protocol::{Reply, Request, Role};
use crate::cli::Exit;
use crate::config::Config;
use crate::paths::VaultPaths;
use serde_json::json;
use std::collections::BTreeMap;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Print one JSON object: the file, and each key's value, unit, source and the agent's value.
    #[arg(long)]
    json: bool,
    /// Print the default file, every key commented (a start for `config.toml`).
    #[arg(long, conflicts_with = "json")]
    defaults: bool,
    /// Sign `[network] allow` with the approver key (asks the passphrase): `vault run` lets the
    /// hosts it names through without a card. A host added later waits for the next --sign.
    #[arg(long, conflicts_with_all = ["json", "defaults"])]
    sign: bool,
    /// With --sign: read the passphrase from the first line of stdin (else
    /// VAULT_PASSPHRASE_FILE, else the terminal).
    #[arg(long, requires = "sign")]
    passphrase_stdin: bool,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let file = paths.config();
    if args.defaults {
        super::out::raw(crate::config::DEFAULTS.as_bytes())?;
        return Ok(Exit::Ok);
    }
    let (config, text) = Config::read(&paths)?;
    if args.sign {
        return sign(&paths, config.network.allow, args.passphrase_stdin);
    }
    let settings = config.settings(text.as_deref());
    // The running agent's view, if one answers (no passphrase needed to ask).
    let agent: Option<BTreeMap<String, u64>> = match Client::connect(&paths, Role::Cli) {
        Ok(Some(mut c)) => match c.call(Request::Status) {
            Ok(Reply::Status(s)) => Some(s.config.into_iter().collect()),
            _ => None,
        },
        _ => None,
    };
    let differs = |name: &str, value: u64| {
        agent
            .as_ref()
            .and_then(|a| a.get(name))
            .filter(|&&v| v != value)
            .copied()
    };
    if args.json {
        let keys: Vec<serde_json::Value> = settings
            .iter()
            .map(|s| {
                let name = format!("{}.{}", s.section, s.key);
                json!({"key": name, "value": s.value, "unit": s.unit,
                       "source": if s.from_file { "config.toml" } else { "default" },
                       "agent_value": differs(&name, s.value)})
            })
            .collect();
        super::print_json(&json!({"file": file, "file_exists": text.is_some(),
            "agent_running": agent.is_some(), "keys": keys}))?;
        return Ok(Exit::Ok);
    }
    match &text {
        Some(_) => outln!(
            "# {} (keys it does not set have their defaults)",
            file.display()
        ),
        None => outln!(
            "# {} does not exist: every key has its default (`vault config --defaults > {}` writes them, commented, to start from)",
            file.display(),
            file.display()
        ),
    }
    let mut section = "";
    let mut changed = 0;
    for s in &settings {
        if s.section != section {
            section = s.section;
            outln!("[{section}]");
        }
        let source = if s.from_file {
            "config.toml"
        } else {
            "default"
        };
        let name = format!("{}.{}", s.section, s.key);
        let line = format!("{} = {}", s.key, s.value);
        match differs(&name, s.value) {
            Some(old) => {
                changed += 1;
                outln!(
                    "{line:<44} # {}, {source}; the running agent uses {old}",
                    s.unit
                );
            }
            None => outln!("{line:<44} # {}, {source}", s.unit),
        }
    }
    if changed > 0 {
        outln!("# {changed} key(s) changed since the agent started: `vault lock`, then `vault unlock`, applies them");
    } else if agent.is_none() {
        outln!("# no vault agent runs: `vault unlock` starts one with these values");
    }
    Ok(Exit::Ok)
}

/// `--sign`: every entry must read as a host, then the approver signs the list as written and
/// the agent records it (a `network.allow` row).
fn sign(paths: &VaultPaths, allow: Vec<String>, stdin: bool) -> anyhow::Result<Exit> {
    for h in &allow {
        crate::contain::egress::Entry::parse(h).map_err(|e| {
            anyhow::anyhow!(
                "[network] allow in {}: {e}; nothing was signed",
                paths.config().display()
            )
        })?;
    }
    let vault_id = crate::vault::Vault::id_of(paths)?;
    let source = crate::keys::PassphraseSource::choose(stdin);
    let keys = super::backend::read_keys(paths, &source, "Vault passphrase: ")?;
    let request = crate::approvals::sign_allowed(&keys.approver, &vault_id, allow);
    let mut backend = super::backend::Backend::secure(paths, keys)?;
    match backend.call(Request::SetAllowedHosts { request })? {
        Reply::Hosts(h) if h.is_empty() => {
            outln!("Signed: no host passes `vault run`'s proxy without a card but the client's model API (and --allow-host).")
        }
        Reply::Hosts(h) => outln!(
            "Signed: `vault run` lets these through without a card: {}",
            h.iter()
                .map(|h| crate::term::escape(h))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => return Err(super::backend::unexpected(other)),
    }
    Ok(Exit::Ok)
}
