//! `vault grants [--json]`: the session grants in force (what `[s]` on a card granted): id,
//! session, client, credential and version, scope, expiry and uses so far. `vault grants revoke
//! ID|--all`: ends them at once, signed by the approver (the passphrase, like `vault resume`) and
//! sent over the encrypted channel, or to the store opened here when the vault is locked.
//! Agent-derived text (client name, paths, commands) is printed through `term::escape`.
use super::backend::{unexpected, Backend, PassphraseArg};
use crate::agent::protocol::{GrantView, Reply, Request};
use crate::cli::Exit;
use crate::paths::VaultPaths;
use crate::term::escape;
use crate::vault::Vault;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(super) struct Args {
    #[command(subcommand)]
    revoke: Option<Sub>,
    #[command(flatten)]
    passphrase: PassphraseArg,
    /// Print a JSON array.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// End a session grant (or every one with --all) at once; asks for the passphrase.
    Revoke(RevokeArgs),
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["id", "all"])))]
struct RevokeArgs {
    /// The grant's id, as `vault grants` lists it (grt_…).
    id: Option<String>,
    /// Every grant in force.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    passphrase: PassphraseArg,
    /// Print the revoked grants as a JSON array.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    if let Some(Sub::Revoke(r)) = args.revoke {
        return revoke(paths, r);
    }
    let mut backend = Backend::open(&paths, args.passphrase.source())?;
    let grants = match backend.call(Request::Grants)? {
        Reply::Grants(g) => g,
        other => return Err(unexpected(other)),
    };
    if args.json {
        return print(&grants);
    }
    if grants.is_empty() {
        outln!("No session grant is in force. `[s]` on a card (or `vault approve --approve-session`) gives one.");
        return Ok(Exit::Ok);
    }
    for g in &grants {
        show(g)?;
    }
    outln!("End one with `vault grants revoke ID`, or all with `vault grants revoke --all`.");
    Ok(Exit::Ok)
}

fn revoke(paths: VaultPaths, args: RevokeArgs) -> anyhow::Result<Exit> {
    let vault_id = Vault::id_of(&paths)?;
    let source = args.passphrase.source();
    let keys = super::backend::read_keys(
        &paths,
        &source,
        "Vault passphrase (to sign the revocation): ",
    )?;
    let revoke = crate::approvals::sign_revocation(&keys.approver, &vault_id, args.id.as_deref());
    let mut backend = Backend::secure(&paths, keys)?;
    let revoked = match backend.call(Request::RevokeGrants { revoke })? {
        Reply::Grants(g) => g,
        other => return Err(unexpected(other)),
    };
    if args.json {
        return print(&revoked);
    }
    if revoked.is_empty() {
        outln!("No session grant was in force; nothing changed.");
    }
    for g in &revoked {
        outln!(
            "Revoked {}: {} for session {} ({} uses). Its next call gets a card.",
            g.id,
            escape(&crate::policy::scope::describe(&g.scope)),
            g.session,
            g.uses
        );
    }
    Ok(Exit::Ok)
}

fn print(grants: &[GrantView]) -> anyhow::Result<Exit> {
    super::print_json(&serde_json::to_value(grants)?)?;
    Ok(Exit::Ok)
}

/// One grant, on three lines: id and what it covers; session and client; credential, expiry and
/// uses.
fn show(g: &GrantView) -> anyhow::Result<()> {
    let client = g.client.as_ref().map_or_else(
        || "?".to_owned(),
        |c| format!("{} {}", escape(&c.name), escape(&c.version)),
    );
    let until = super::out::local_time(&g.expires_at);
    outln!(
        "{}  {}",
        g.id,
        escape(&crate::policy::scope::describe(&g.scope))
    );
    outln!("    session {}  client {}", g.session, client.trim());
    outln!(
        "    credential {} version {}  until {until}  used {} time{}",
        escape(&g.credential.name),
        g.credential.version,
        g.uses,
        if g.uses == 1 { "" } else { "s" }
    );
    Ok(())
}
