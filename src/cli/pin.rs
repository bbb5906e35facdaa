//! `vault pin`: set or change the approval PIN, the short secret every approval on a card takes
//! (SECURITY.md "Who can approve"). It takes the passphrase: the approver signs the change, so a
//! process of the person's user cannot set a PIN it knows.
use super::backend::{read_keys, unexpected, Backend, PassphraseArg};
use crate::agent::protocol::{Reply, Request};
use crate::approvals::pin;
use crate::cli::Exit;
use crate::keys::{read_stdin_line, read_terminal};
use crate::paths::VaultPaths;
use crate::vault::Vault;
use crate::wire::Secret;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    #[command(flatten)]
    passphrase: PassphraseArg,
    /// Read the new PIN from the next line of stdin (after the passphrase, with
    /// --passphrase-stdin) instead of the terminal.
    #[arg(long)]
    pin_stdin: bool,
}

/// How a PIN is given without a terminal.
const PIN_INSTEAD: &str = "give it with --pin-stdin (a line of stdin)";

/// A new PIN: from the next line of stdin, or asked twice on the terminal; checked against
/// `pin::check_new`.
pub(super) fn read_new(from_stdin: bool) -> anyhow::Result<Secret> {
    if from_stdin {
        let pin = read_stdin_line("PIN")?;
        pin::check_new(&pin).map_err(|why| anyhow::anyhow!("{why}; choose another"))?;
        return Ok(Secret::new(pin.as_bytes().to_vec()));
    }
    // On a terminal a PIN that is refused, or typed differently twice, is asked again (up to
    // three times, the prompt saying why).
    let mut prompt = "New approval PIN (typed on every approval): ".to_owned();
    for attempt in 1..=3 {
        let first = read_terminal("PIN", &prompt, PIN_INSTEAD)?;
        if let Err(why) = pin::check_new(&first) {
            if attempt == 3 {
                anyhow::bail!("{why}; nothing changed. Run `vault pin` again");
            }
            prompt = format!("{why}; choose another. New approval PIN: ");
            continue;
        }
        let again = read_terminal("PIN", "Repeat the PIN: ", PIN_INSTEAD)?;
        if *again == *first {
            return Ok(Secret::new(first.as_bytes().to_vec()));
        }
        prompt = "The two differ; type it again. New approval PIN: ".to_owned();
    }
    anyhow::bail!("the two PINs differed three times; nothing changed. Run `vault pin` again")
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let vault_id = Vault::id_of(&paths)?;
    let source = args.passphrase.source();
    let keys = read_keys(&paths, &source, "Vault passphrase: ")?;
    let new = read_new(args.pin_stdin)?;
    let request = pin::sign_pin(&keys.approver, &vault_id, &new);
    let mut backend = Backend::secure(&paths, keys)?;
    match backend.call(Request::SetPin { request, pin: new })? {
        Reply::Ok => outln!("Approval PIN set: every approval on a card now takes it."),
        other => return Err(unexpected(other)),
    }
    Ok(Exit::Ok)
}
