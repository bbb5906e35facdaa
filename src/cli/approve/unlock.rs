//! Getting the approver in: the passphrase, the encrypted channel to the vault's real agent
//! (which only a holder of the key completes), and the subscription to its queue; on a vault with
//! no approval PIN yet, the person chooses one (typed twice, nothing shown) and it is set, signed
//! with the approver key, before any card is shown.
use super::tty::{read_pin, Tty};
use super::watch::Watch;
use crate::agent::client::Client;
use crate::agent::protocol::{Reply, Request};
use crate::keys::{ApproverKey, PassphraseSource};
use crate::paths::VaultPaths;
use crate::wire::Secret;

/// Asks the passphrase, then connects to the vault's real agent over the encrypted channel
/// (which only a holder of the key completes) and subscribes to the queue. The master key is
/// dropped (wiped) once the channel is open: only the approver key stays, to sign, and the
/// channel's key (derived from it), to reach the next agent if this one goes.
pub(super) fn unlock(
    paths: &VaultPaths,
    source: &PassphraseSource,
    tty: &mut Tty,
) -> anyhow::Result<(Watch, ApproverKey)> {
    tty.raw(false);
    let keys = super::super::backend::read_keys(paths, source, "Vault passphrase: ");
    tty.raw(true);
    let keys = keys?;
    let mut client = crate::agent::handoff::approver_client(paths, &keys)?;
    let psk = crate::agent::channel::channel_key(&keys.master);
    let approver = keys.into_approver();
    ensure_pin(&mut client, &approver, tty)?;
    match client.call(Request::WatchPending)? {
        Reply::Ok => Ok((Watch::new(paths.clone(), psk, client), approver)),
        other => Err(super::super::backend::unexpected(other)),
    }
}

/// On a vault with no approval PIN, asks the person to choose one (twice) and sets it, signed
/// with the approver key: no card can be approved without it.
fn ensure_pin(client: &mut Client, approver: &ApproverKey, tty: &mut Tty) -> anyhow::Result<()> {
    let set = match client.call(Request::Status)? {
        Reply::Status(s) => s.store.is_some_and(|s| s.pin_set),
        other => return Err(super::super::backend::unexpected(other)),
    };
    if set {
        return Ok(());
    }
    tty.show(&format!(
        "\x1b[2J\x1b[HThis vault has no approval PIN yet.\n\nEvery approval takes it, typed after [a] or [s] with nothing shown, so a program\nthat can type into this terminal still cannot approve. {}\n",
        crate::approvals::pin::RULE
    ));
    for _ in 0..3 {
        let Some(pin) = read_pin(tty, "Choose an approval PIN: ") else {
            anyhow::bail!("no approval PIN was chosen, so no card could be approved; run `vault approve` again (or `vault pin`)");
        };
        let text = String::from_utf8_lossy(pin.expose());
        if let Err(why) = crate::approvals::pin::check_new(&text) {
            tty.show(&format!("\r\n{why}; try again.\n"));
            continue;
        }
        let again = read_pin(tty, "Type it again: ");
        if again.as_ref().map(Secret::expose) != Some(pin.expose()) {
            tty.show("\r\nThe two did not match; try again.\n");
            continue;
        }
        let request = crate::approvals::pin::sign_pin(approver, &client.vault_id, &pin);
        match client.call(Request::SetPin { request, pin })? {
            Reply::Ok => return Ok(()),
            other => return Err(super::super::backend::unexpected(other)),
        }
    }
    anyhow::bail!(
        "no approval PIN was set after three tries; run `vault approve` again (or `vault pin`)"
    )
}
