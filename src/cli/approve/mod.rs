//! `vault approve`: the human gate. Interactive (passphrase once, then a card per action, see
//! `screen.rs`) or scripted (`--id ACT --approve|--deny --passphrase-stdin`). Decisions are
//! signed with the approver key from `vault.key.age`; nothing here runs an action.
mod card;
mod screen;

use crate::approvals::{self, ApprovalError, Verdict};
use crate::keys::PassphraseSource;
use crate::paths::VaultPaths;
use crate::vault::Vault;
use crate::Exit;
use clap::ArgGroup;

#[derive(Debug, clap::Args)]
#[command(group(ArgGroup::new("verdict").args(["approve", "approve_session", "deny"])))]
pub struct Args {
    /// Decide one action without the interactive queue (needs one of --approve, --approve-session, --deny).
    #[arg(long, value_name = "ACTION_ID", requires = "verdict")]
    id: Option<String>,
    #[arg(long, requires = "id")]
    approve: bool,
    /// Approve, and let the same session use this credential without asking for an hour.
    #[arg(long, requires = "id")]
    approve_session: bool,
    #[arg(long, requires = "id")]
    deny: bool,
    /// Why it was denied (returned to the agent).
    #[arg(long, requires = "deny")]
    reason: Option<String>,
    /// Read the passphrase from the first line of stdin (else VAULT_PASSPHRASE_FILE, else the terminal).
    #[arg(long)]
    passphrase_stdin: bool,
    /// Print the decided action as JSON (scripted mode).
    #[arg(long)]
    json: bool,
}

pub fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let config = crate::config::Config::load(&paths)?;
    let Some(id) = args.id else {
        return screen::run(
            paths,
            PassphraseSource::choose(args.passphrase_stdin),
            &config,
        );
    };
    let passphrase = PassphraseSource::choose(args.passphrase_stdin).read("Vault passphrase: ")?;
    let (mut vault, keys) = Vault::open_with_passphrase(paths, &passphrase)?;
    let verdict = if args.approve {
        Verdict::Approve
    } else if args.approve_session {
        Verdict::ApproveSession
    } else {
        Verdict::Deny(args.reason.clone())
    };
    let _ = approvals::reap_orphans(&mut vault.store);
    let decided = match approvals::decide(
        &mut vault.store,
        &keys.approver,
        &id,
        verdict,
        config.session_grant(),
    ) {
        Ok(a) => a,
        Err(ApprovalError::NotFound(_)) => {
            anyhow::bail!("no action {id}; `vault pending` lists what waits")
        }
        Err(ApprovalError::NotPending { state, .. }) => {
            anyhow::bail!("action {id} is {state}, not pending; nothing was decided")
        }
        Err(e) => return Err(e.into()),
    };
    if args.json {
        super::print_json(
            &serde_json::json!({"action_id": decided.id, "state": decided.state.as_str(), "summary": decided.summary}),
        );
    } else {
        println!(
            "{} {}: {}",
            decided.state,
            decided.id,
            crate::term::escape(&decided.summary)
        );
    }
    Ok(Exit::Ok)
}
