//! The approval PIN (docs/design.md §4, SECURITY.md "Who can approve"): a short secret the person
//! types, without echo, with every approval on a card. A process of the person's uid can type
//! into their terminal but does not know it, so the keys a card names are not enough to approve.
//! The approver signs a change of PIN (`PinPayload`, single use, fresh); the agent keeps only a
//! salted blake3 of it inside the encrypted store (`meta.approval_pin`), checks it for every
//! decision whose method is `pin`, counts wrong ones in a row (`meta.approval_pin_failures`,
//! journaled as `approval.pin_wrong`) and pauses the vault at `MAX_FAILURES`.
use super::pause::pause;
use super::signing::{self, Signed, Trust};
use super::ApprovalError;
use crate::audit;
use crate::keys::ApproverKey;
use crate::store::{get_meta, set_meta, Store, StoreError};
use crate::wire::journal::{Kind, PinSet, PinWrong};
use crate::wire::{Op, Payload, PinPayload, Secret};
use jiff::Timestamp;
use rusqlite::Connection;

/// The shortest and longest PIN.
pub const MIN_CHARS: usize = 4;
pub const MAX_CHARS: usize = 32;
/// The rule, as the person is told it.
pub const RULE: &str = "A PIN has 4 to 32 characters and no spaces; it is never shown.";
/// Wrong PINs in a row that pause the vault.
pub const MAX_FAILURES: u32 = 3;

const VERIFIER: &str = "approval_pin";
const FAILURES: &str = "approval_pin_failures";

/// Why a PIN cannot be used as one.
pub fn check_new(pin: &str) -> Result<(), String> {
    let n = pin.chars().count();
    if !(MIN_CHARS..=MAX_CHARS).contains(&n) {
        return Err(format!(
            "an approval PIN has {MIN_CHARS} to {MAX_CHARS} characters (this one has {n})"
        ));
    }
    if pin.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("an approval PIN has no spaces or control characters".into());
    }
    Ok(())
}

fn commitment(nonce: &str, pin: &[u8]) -> String {
    let mut h = blake3::Hasher::new_derive_key("agent-vault approval pin commitment v1");
    h.update(nonce.as_bytes());
    h.update(pin);
    h.finalize().to_hex().to_string()
}

fn salted(salt: &[u8], pin: &[u8]) -> blake3::Hash {
    let mut h = blake3::Hasher::new_derive_key("agent-vault approval pin verifier v1");
    h.update(salt);
    h.update(pin);
    h.finalize()
}

/// The approver's side of setting the PIN: a signed, single-use request bound to this PIN.
pub fn sign_pin(key: &ApproverKey, vault_id: &str, pin: &Secret) -> Signed {
    let nonce = signing::random_hex();
    signing::sign(
        key,
        &PinPayload {
            v: PinPayload::VERSION,
            vault_id: vault_id.to_owned(),
            op: Op::SetPin,
            commitment: commitment(&nonce, pin.expose()),
            nonce,
            issued_at: crate::wire::ts::to_millis(Timestamp::now()),
        },
    )
}

/// Whether the vault has an approval PIN.
pub fn is_set(conn: &Connection) -> Result<bool, StoreError> {
    Ok(get_meta(conn, VERIFIER)?.is_some())
}

/// Sets (or replaces) the PIN: the approver's fresh, never-used signature over this PIN.
pub fn set(
    store: &mut Store,
    trust: &Trust,
    signed: &Signed,
    pin: &Secret,
) -> Result<(), ApprovalError> {
    let refuse = |why: &str| ApprovalError::BadDecision(why.to_owned());
    let p: PinPayload = signed.open(trust).ok_or(ApprovalError::WrongApprover)?;
    let fresh = Timestamp::now().duration_since(p.issued_at).as_secs().abs() <= 300;
    if !fresh || p.op != Op::SetPin || p.nonce.len() < 16 {
        return Err(refuse("the PIN change is stale; run `vault pin` again"));
    }
    let bytes = pin.expose();
    if commitment(&p.nonce, bytes) != p.commitment {
        return Err(refuse("the PIN sent is not the one the approver signed"));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| refuse("the PIN is not UTF-8 text"))?;
    check_new(text).map_err(|why| refuse(&why))?;
    let tx = store.write()?;
    let used: bool = tx
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM audit WHERE kind = ?1 AND json_extract(body, '$.nonce') = ?2)",
        )?
        .query_row([Kind::PinSet.as_str(), p.nonce.as_str()], |r| r.get(0))?;
    if used {
        return Err(refuse("this PIN change was already used"));
    }
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).expect("the OS random number generator failed");
    let verifier = format!("v1:{}:{}", hex::encode(salt), salted(&salt, bytes).to_hex());
    set_meta(&tx, VERIFIER, &verifier)?;
    set_meta(&tx, FAILURES, "0")?;
    audit::append(&tx, None, None, &PinSet { nonce: p.nonce })?;
    tx.commit()?;
    Ok(())
}

/// Whether `pin` is the vault's PIN (`None` when no PIN is set).
fn matches(conn: &Connection, pin: &[u8]) -> Result<Option<bool>, StoreError> {
    let Some(v) = get_meta(conn, VERIFIER)? else {
        return Ok(None);
    };
    let damaged = || StoreError::Damaged("meta.approval_pin is not a PIN verifier");
    let mut parts = v.split(':');
    let (Some("v1"), Some(salt), Some(hash), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(damaged());
    };
    let salt = hex::decode(salt).map_err(|_| damaged())?;
    let want = blake3::Hash::from_hex(hash).map_err(|_| damaged())?;
    // blake3::Hash compares in constant time.
    Ok(Some(salted(&salt, pin) == want))
}

/// Checks the PIN that came with an approval of `action_id`. A right one clears the count of
/// wrong ones; a wrong (or missing) one is counted and journaled, and the `MAX_FAILURES`-th in a
/// row pauses the vault. Each outcome is committed before this returns.
pub(super) fn check(
    store: &mut Store,
    pin: Option<&Secret>,
    action_id: &str,
) -> Result<(), ApprovalError> {
    if crate::mutation::off("pin_check") {
        return Ok(());
    }
    let given = pin.map_or(&[][..], Secret::expose);
    let failures = |c: &Connection| -> Result<u32, StoreError> {
        Ok(get_meta(c, FAILURES)?
            .and_then(|n| n.parse().ok())
            .unwrap_or(0))
    };
    match matches(store.conn(), given)? {
        None => return Err(ApprovalError::NoPin),
        Some(true) => {
            if failures(store.conn())? > 0 {
                let tx = store.write()?;
                set_meta(&tx, FAILURES, "0")?;
                tx.commit()?;
            }
            return Ok(());
        }
        Some(false) => {}
    }
    let tx = store.write()?;
    let n = failures(&tx)?.saturating_add(1);
    let paused = n >= MAX_FAILURES;
    set_meta(&tx, FAILURES, &n.to_string())?;
    let body = PinWrong {
        action: action_id.to_owned(),
        failures: n,
        paused,
    };
    audit::append(&tx, None, Some(action_id), &body)?;
    tx.commit()?;
    if paused {
        pause(
            store,
            &format!("the approval PIN was wrong {n} times in a row: something may be typing into the approver's terminal"),
        )?;
        return Err(ApprovalError::PinLimit(n));
    }
    Err(ApprovalError::WrongPin {
        left: MAX_FAILURES - n,
    })
}

/// Clears the count of wrong PINs (`vault resume`: the person has looked).
pub(super) fn clear_failures(tx: &Connection) -> Result<(), StoreError> {
    set_meta(tx, FAILURES, "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_pins_are_checked_for_length_and_characters() {
        assert!(check_new("4711").is_ok());
        assert!(check_new("correct-horse").is_ok());
        assert!(check_new("123").is_err());
        assert!(check_new("12 34").is_err());
        assert!(check_new("12\u{1b}34").is_err());
        assert!(check_new(&"9".repeat(MAX_CHARS + 1)).is_err());
    }

    #[test]
    fn the_commitment_binds_nonce_and_pin() {
        assert_ne!(commitment("n1", b"4711"), commitment("n2", b"4711"));
        assert_ne!(commitment("n1", b"4711"), commitment("n1", b"4712"));
        assert_eq!(commitment("n1", b"4711"), commitment("n1", b"4711"));
    }
}
