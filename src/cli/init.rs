//! `vault init`: create a vault and leave it unlocked, as `vault unlock` would (an agent started
//! with the key), so the AI client's `vault mcp` works at once.
use crate::agent::{handoff, DEFAULT_LIFETIME};
use crate::cli::Exit;
use crate::keys::PassphraseSource;
use crate::paths::VaultPaths;
use crate::vault::{Vault, VaultError};

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Read the new passphrase from the first line of stdin (else VAULT_PASSPHRASE_FILE, else the terminal).
    #[arg(long)]
    passphrase_stdin: bool,
    /// Read the approval PIN from the next line of stdin. Without it the PIN is asked on the
    /// terminal when the passphrase was, else at the first `vault approve` (or `vault pin`).
    #[arg(long)]
    pin_stdin: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    if paths.is_initialized() {
        // Say so before asking for a passphrase.
        return Err(VaultError::AlreadyInitialized(paths.dir().display().to_string()).into());
    }
    let source = PassphraseSource::choose(args.passphrase_stdin);
    let passphrase = source.read_new()?;
    // Asked before anything is created, so a PIN refused leaves no half-made vault.
    let pin = if args.pin_stdin || source == PassphraseSource::Terminal {
        Some(super::pin::read_new(args.pin_stdin)?)
    } else {
        None
    };
    let (mut vault, keys) = Vault::init(paths, &passphrase)?;
    if let Some(pin) = &pin {
        let signed = crate::approvals::pin::sign_pin(&keys.approver, &vault.vault_id, pin);
        let trust = vault.trust(&keys);
        crate::approvals::pin::set(&mut vault.store, &trust, &signed, pin)?;
    }
    let Vault {
        paths, vault_id, ..
    } = vault;
    let public = keys.approver.public();
    let agent = handoff::start_agent(
        &paths,
        &vault_id,
        &keys,
        DEFAULT_LIFETIME,
        handoff::IfRunning::Keep,
    );
    drop(keys);
    if args.json {
        super::print_json(&serde_json::json!({
            "vault_id": vault_id,
            "dir": paths.dir(),
            "agent": agent.as_ref().ok().map(|s| serde_json::json!({"pid": s.pid, "socket": s.socket})),
            "approver_public_key": {
                "hex": crate::keys::public::to_hex(&public),
                "ssh": crate::keys::public::to_ssh_line(&public),
            },
        }))?;
        super::approver::keep_it_elsewhere(&vault_id);
    } else {
        outln!("Created vault {vault_id} in {}", paths.dir().display());
        match &agent {
            Ok(s) => outln!(
                "Unlocked: agent pid {} listens on {}; `vault lock` locks it.",
                s.pid,
                s.socket
            ),
            Err(e) => outln!("The vault agent did not start ({e}); run `vault unlock`."),
        }
        outln!(
            "Back up {} and remember the passphrase: together they are the only way back in.",
            paths.key_file().display()
        );
        if pin.is_none() {
            outln!("No approval PIN yet: `vault approve` asks for one before the first card (or run `vault pin`).");
        }
        outln!("Approver public key:");
        super::approver::print_public_key(&vault_id, &public, false)?;
    }
    Ok(Exit::Ok)
}
