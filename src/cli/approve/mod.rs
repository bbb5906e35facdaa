//! `vault approve`: the human gate. Interactive (passphrase once, then a card per action, see
//! `screen.rs`) or scripted (`--id ACT --approve|--deny --passphrase-stdin`). It talks only to an
//! agent that proves it holds the vault's key (starting one if none does), re-derives every
//! action's hash from the request it shows, and signs exactly that hash with the approver key
//! from `vault.key.age`; nothing here runs an action.
mod card;
mod facts;
#[cfg(test)]
mod fit_tests;
mod layout;
mod preview;
mod screen;
mod tty;
mod unlock;
mod watch;

use crate::agent::client::ClientError;
use crate::agent::handoff::approver_client;
use crate::agent::protocol::{Reply, Request};
use crate::approvals::Verdict;
use crate::cli::Exit;
use crate::keys::PassphraseSource;
use crate::paths::VaultPaths;
use crate::vault::Vault;
use clap::ArgGroup;

/// How long an approval waits for the security key's touch, where the credential needs one.
const TOUCH_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

#[derive(Debug, clap::Args)]
#[command(group(ArgGroup::new("verdict").args(["approve", "approve_session", "deny"])))]
pub(super) struct Args {
    /// Decide one action without the interactive queue (needs one of --approve, --approve-session, --deny).
    #[arg(long, value_name = "ACTION_ID", requires = "verdict")]
    id: Option<String>,
    #[arg(long, requires = "id")]
    approve: bool,
    /// Approve, and let the same session's next calls of the same kind run without a card
    /// until `[approvals] session_grant_seconds` (default 3600) from now: what the card's
    /// `[s] covers` line names (reads at or under this read's directory, or exactly this
    /// method and path, or exactly this SSH command), not every use of the credential.
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

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let config = crate::config::Config::load(&paths)?;
    let Some(id) = args.id else {
        return screen::run(
            paths,
            PassphraseSource::choose(args.passphrase_stdin),
            &config,
        );
    };
    Vault::id_of(&paths)?;
    let source = PassphraseSource::choose(args.passphrase_stdin);
    let keys = super::backend::read_keys(&paths, &source, "Vault passphrase: ")?;
    let mut client = approver_client(&paths, &keys)?;
    // The channel is open: only the approver key is needed from here on.
    let approver = keys.into_approver();
    let verdict = if args.approve {
        Verdict::Approve
    } else if args.approve_session {
        Verdict::ApproveSession
    } else {
        Verdict::Deny(args.reason.clone())
    };
    let view = match client.call(Request::ForApproval {
        action_id: id.clone(),
    }) {
        Ok(Reply::View(v)) => v,
        Ok(other) => return Err(super::backend::unexpected(other)),
        Err(ClientError::Refused { .. }) => {
            anyhow::bail!("no action {id}; `vault pending` lists what waits")
        }
        Err(e) => return Err(e.into()),
    };
    // The passphrase was typed for this decision: that is its proof (with a touch, where the
    // credential needs one).
    let proof = crate::agent::client::Proof::Passphrase;
    let short = view
        .action
        .action_hash
        .get(..12)
        .unwrap_or_default()
        .to_owned();
    let mut toucher = |challenge: &[u8; 32], allow: &[Vec<u8>]| {
        super::out::note(format_args!(
            "Touch your security key for {short}… (waiting {} s)",
            TOUCH_WAIT.as_secs()
        ));
        let mut ask_pin =
            || super::approver::terminal_pin("run `vault approve` in a terminal to type it");
        super::approver::usb_touch(challenge, allow, TOUCH_WAIT, &mut ask_pin)
    };
    let decided = match client.decide_touched(
        &approver,
        &view,
        &verdict,
        proof,
        config.session_grant(),
        Some(&mut toucher),
    ) {
        Ok(a) => a,
        Err(ClientError::Refused { code, message }) => {
            return Err(super::backend::Refused {
                code,
                message: format!("{message}; nothing was decided"),
            }
            .into())
        }
        Err(e) => return Err(e.into()),
    };
    // What was decided, named from the request whose hash was checked, not the agent's words.
    let what = facts::card_data(&view).headline();
    if args.json {
        let until = decided.session_until.map(crate::wire::ts::format_millis);
        let grant = decided.scope.as_ref().map(|s| {
            serde_json::json!({"scope": crate::policy::scope::describe(s), "covers": s, "until": until})
        });
        super::print_json(
            &serde_json::json!({"action_id": decided.action.id, "state": decided.action.state.as_str(), "summary": what, "session_until": until, "grant": grant}),
        )?;
    } else {
        outln!("{}", decided_line(&decided, &what));
    }
    Ok(Exit::Ok)
}

/// `approved act_…: GET https://… (for this session until 15:10: GET, HEAD under /a/ …)`: what
/// was decided, and until when and for what a session grant lets the same session's calls on
/// this credential run without a card.
pub(super) fn decided_line(d: &crate::agent::client::Decided, what: &str) -> String {
    let mut line = format!("{} {}: {what}", d.action.state, d.action.id);
    if let Some(until) = d.session_until {
        let local = until.to_zoned_datetime(jiff::tz::TimeZone::system());
        let covers = d.scope.as_ref().map_or(String::new(), |s| {
            format!(
                ": {}",
                crate::term::escape(&crate::policy::scope::describe(s))
            )
        });
        line += &format!(
            " (for this session until {}{covers})",
            local.strftime("%H:%M")
        );
    }
    line
}
