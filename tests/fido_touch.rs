//! FIDO2 touches at the protocol level: agent-vault's CTAP2 requests go, as CBOR, to a software
//! authenticator (1Password's passkey-authenticator, decoding them with its own types), and its
//! CBOR answers are read and checked by the code that checks a USB key's. A touch verifies only
//! for the action, nonce and vault it was made for, only against the key that made it, and a
//! key whose counter goes back (a clone, a replay) is told apart.
mod support;

use agent_vault::fido::{self, FidoError};
use std::sync::atomic::Ordering;
use support::soft_key::{no_pin, SoftKey};

const VAULT: &str = "vlt_0123456789abcdef";
const HASH: &str = "9f2c1e5b7a3d4f60112233445566778899aabbccddeeff00112233445566778";
const NONCE: &str = "00112233445566778899aabbccddeeff";

fn registered(key: &mut SoftKey) -> fido::Registration {
    fido::register(key, VAULT, "reg-nonce-0001", &[], &mut no_pin).expect("registration")
}

fn check(
    reg: &fido::Registration,
    challenge: &[u8; 32],
    t: &fido::Touch,
) -> Result<u32, FidoError> {
    let public = fido::parse_cose_key(&reg.public_key)?;
    fido::verify_assertion(&public, challenge, &t.auth_data, &t.signature).map(|d| d.counter)
}

#[test]
fn a_touch_verifies_for_its_own_action_with_either_algorithm() {
    for (mut key, alg) in [(SoftKey::es256(), "ES256"), (SoftKey::eddsa(), "EdDSA")] {
        let reg = registered(&mut key);
        assert_eq!(reg.algorithm, alg);
        let challenge = fido::challenge(VAULT, HASH, NONCE);
        let t = fido::touch(
            &mut key,
            &challenge,
            std::slice::from_ref(&reg.credential_id),
            &mut no_pin,
        )
        .expect("a touch");
        assert_eq!(t.credential_id, reg.credential_id);
        let counter = check(&reg, &challenge, &t).expect("the touch verifies");
        assert!(counter > reg.counter, "{alg}: the counter moved on");
    }
}

#[test]
fn a_touch_for_another_action_nonce_or_vault_does_not_verify() {
    let mut key = SoftKey::es256();
    let reg = registered(&mut key);
    let challenge = fido::challenge(VAULT, HASH, NONCE);
    let t = fido::touch(
        &mut key,
        &challenge,
        std::slice::from_ref(&reg.credential_id),
        &mut no_pin,
    )
    .unwrap();
    let other_hash = HASH.replace('9', "8");
    for other in [
        fido::challenge(VAULT, &other_hash, NONCE),
        // The same action, a later decision: the old touch replayed.
        fido::challenge(VAULT, HASH, "ffeeddccbbaa99887766554433221100"),
        fido::challenge("vlt_another", HASH, NONCE),
    ] {
        assert!(matches!(
            check(&reg, &other, &t),
            Err(FidoError::BadSignature)
        ));
    }
}

#[test]
fn another_key_neither_answers_for_a_registered_credential_nor_verifies_as_it() {
    let mut mine = SoftKey::es256();
    let reg = registered(&mut mine);
    let mut theirs = SoftKey::es256();
    let their_reg = registered(&mut theirs);
    let challenge = fido::challenge(VAULT, HASH, NONCE);
    // Asked for my credential, their key holds none of it.
    let err = fido::touch(
        &mut theirs,
        &challenge,
        std::slice::from_ref(&reg.credential_id),
        &mut no_pin,
    );
    assert!(matches!(err, Err(FidoError::NotRegistered)), "{err:?}");
    // Their own touch, presented as mine, does not verify against my key.
    let t = fido::touch(
        &mut theirs,
        &challenge,
        std::slice::from_ref(&their_reg.credential_id),
        &mut no_pin,
    )
    .unwrap();
    assert!(matches!(
        check(&reg, &challenge, &t),
        Err(FidoError::BadSignature)
    ));
    assert!(check(&their_reg, &challenge, &t).is_ok());
}

#[test]
fn a_lifted_finger_is_a_refusal() {
    let mut key = SoftKey::es256();
    let reg = registered(&mut key);
    key.touches.store(false, Ordering::SeqCst);
    let challenge = fido::challenge(VAULT, HASH, NONCE);
    let err = fido::touch(
        &mut key,
        &challenge,
        std::slice::from_ref(&reg.credential_id),
        &mut no_pin,
    );
    assert!(matches!(err, Err(FidoError::Refused)), "{err:?}");
    let err = fido::register(&mut key, VAULT, "reg-nonce-0002", &[], &mut no_pin);
    assert!(matches!(err, Err(FidoError::Refused)), "{err:?}");
    // (A second registration of the same key is refused by a key that honours the excludeList
    // the request carries; passkey-authenticator 0.6 checks presence and then makes a new
    // credential anyway, so that refusal is `ctap2::status`'s unit test, not this one.)
}

#[test]
fn a_counter_that_goes_back_is_told_apart() {
    let mut key = SoftKey::es256();
    let reg = registered(&mut key);
    let clone = key.snapshot();
    let allow = std::slice::from_ref(&reg.credential_id);
    let mut last = Some(reg.counter);
    for nonce in ["n-1-0123456789abcdef", "n-2-0123456789abcdef"] {
        let c = fido::challenge(VAULT, HASH, nonce);
        let now = check(
            &reg,
            &c,
            &fido::touch(&mut key, &c, allow, &mut no_pin).unwrap(),
        )
        .unwrap();
        assert!(fido::counter_moved_on(last, now));
        last = Some(now);
    }
    // The clone, made before those two touches, signs validly, with a counter behind.
    key.restore(clone);
    let c = fido::challenge(VAULT, HASH, "n-3-0123456789abcdef");
    let now = check(
        &reg,
        &c,
        &fido::touch(&mut key, &c, allow, &mut no_pin).unwrap(),
    )
    .unwrap();
    assert!(!fido::counter_moved_on(last, now), "{last:?} then {now}");
}

#[test]
fn a_changed_byte_anywhere_in_a_touch_fails_it() {
    let mut key = SoftKey::eddsa();
    let reg = registered(&mut key);
    let challenge = fido::challenge(VAULT, HASH, NONCE);
    let t = fido::touch(
        &mut key,
        &challenge,
        std::slice::from_ref(&reg.credential_id),
        &mut no_pin,
    )
    .unwrap();
    for i in 0..t.auth_data.len() {
        let mut bad = t.clone();
        bad.auth_data[i] ^= 0x01;
        assert!(check(&reg, &challenge, &bad).is_err(), "auth data byte {i}");
    }
    let mut bad = t.clone();
    bad.signature[10] ^= 0x80;
    assert!(matches!(
        check(&reg, &challenge, &bad),
        Err(FidoError::BadSignature)
    ));
}
