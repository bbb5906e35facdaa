//! A security key with a PIN, at the protocol level: agent-vault's `authenticatorClientPIN`
//! requests (PIN/UV auth protocol 2) go, as bytes, to soft-fido2's authenticator, which speaks
//! that protocol from its own implementation (passkey-rs, the other tests' key, has no PIN).
//! Registration asks the PIN once and only of a key that has one; a wrong or missing PIN
//! registers nothing; the key's own store is what says nothing was made.
use agent_vault::fido::{self, FidoError, Transport};
use secrecy::SecretString;
use sha2::{Digest, Sha256};
use soft_fido2::{
    Authenticator, AuthenticatorCallbacks, AuthenticatorConfig, AuthenticatorOptions, Credential,
    CredentialRef, UpResult, UvResult,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

const VAULT: &str = "vlt_0123456789abcdef0123456789abcdef";
const PIN: &str = "424242";

/// The key's store of discoverable credentials (agent-vault makes none: it stays empty).
#[derive(Clone, Default)]
struct Store(Arc<Mutex<HashMap<Vec<u8>, Credential>>>);

impl AuthenticatorCallbacks for Store {
    fn request_up(&self, _: &str, _: Option<&str>, _: &str) -> soft_fido2::Result<UpResult> {
        Ok(UpResult::Accepted)
    }
    // No built-in verification (fingerprint): the PIN is the key's only way to verify.
    fn request_uv(&self, _: &str, _: Option<&str>, _: &str) -> soft_fido2::Result<UvResult> {
        Ok(UvResult::Denied)
    }
    fn write_credential(&self, c: &CredentialRef) -> soft_fido2::Result<()> {
        self.0.lock().unwrap().insert(c.id.to_vec(), c.to_owned());
        Ok(())
    }
    fn read_credential(&self, id: &[u8]) -> soft_fido2::Result<Option<Credential>> {
        Ok(self.0.lock().unwrap().get(id).cloned())
    }
    fn delete_credential(&self, id: &[u8]) -> soft_fido2::Result<()> {
        self.0.lock().unwrap().remove(id);
        Ok(())
    }
    fn list_credentials(&self, rp: &str, _: Option<&[u8]>) -> soft_fido2::Result<Vec<Credential>> {
        let all = self.0.lock().unwrap();
        Ok(all.values().filter(|c| c.rp.id == rp).cloned().collect())
    }
    fn enumerate_rps(&self) -> soft_fido2::Result<Vec<(String, Option<String>, usize)>> {
        Ok(Vec::new())
    }
    fn credential_count(&self) -> soft_fido2::Result<usize> {
        Ok(self.0.lock().unwrap().len())
    }
    fn get_timestamp_ms(&self) -> u64 {
        std::time::UNIX_EPOCH.elapsed().unwrap().as_millis() as u64
    }
}

/// One soft-fido2 key behind `fido::Transport`, counting the commands that reach it by byte.
struct PinKey {
    auth: Authenticator<Store>,
    commands: Vec<u8>,
}

impl PinKey {
    /// A key with `pin` set, or none. soft-fido2 takes a preset PIN from a process-wide slot
    /// when a key is made: one key at a time is made here, so no other test's key takes it.
    fn new(pin: Option<&str>) -> Self {
        Self::with(pin, false)
    }

    /// `new`, and with `always_uv` a key set to verify its person for every signature.
    fn with(pin: Option<&str>, always_uv: bool) -> Self {
        static MAKING: Mutex<()> = Mutex::new(());
        let _one = MAKING.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pin) = pin {
            Authenticator::<Store>::set_pin_hash(&Sha256::digest(pin.as_bytes()));
        }
        let options = AuthenticatorOptions::new()
            .with_user_presence(true)
            .with_user_verification(None)
            .with_client_pin(Some(pin.is_some()))
            // soft-fido2 answers an alwaysUv getAssertion with PUAT_REQUIRED (as CTAP 2.1 says
            // a key without noMcGaPermissionsWithClientPin does) only when it takes no
            // permission tokens; with them it answers OPERATION_DENIED. So its alwaysUv key is a
            // CTAP 2.0-style one, and the PIN goes through getPinToken there.
            .with_pin_uv_auth_token(Some(!always_uv))
            .with_always_uv(Some(always_uv));
        // Credentials as agent-vault asks for them (rk false), as a USB key makes them: wrapped in
        // their id, nothing stored on the key.
        let config = AuthenticatorConfig::builder()
            .options(options)
            .force_resident_keys(false)
            .build();
        Self {
            auth: Authenticator::with_config(Store::default(), config).expect("a soft key"),
            commands: Vec::new(),
        }
    }

    /// `fido::register` for the vault `VAULT`, excluding nothing.
    fn register(
        &mut self,
        nonce: &str,
        ask_pin: fido::AskPin<'_>,
    ) -> Result<fido::Registration, FidoError> {
        fido::register(self, VAULT, nonce, &[], ask_pin)
    }

    fn sent(&self, command: u8) -> usize {
        self.commands.iter().filter(|c| **c == command).count()
    }
}

impl Transport for PinKey {
    fn call(&mut self, command: u8, cbor: &[u8]) -> Result<Vec<u8>, FidoError> {
        self.commands.push(command);
        let mut request = vec![command];
        request.extend_from_slice(cbor);
        let mut response = Vec::new();
        self.auth
            .handle(&request, &mut response)
            .map_err(|_| FidoError::Malformed("the soft key failed"))?;
        Ok(response)
    }
}

/// A PIN source that answers `pin` and counts how often it was asked.
fn typed<'a>(
    pin: &'static str,
    asked: &'a mut usize,
) -> impl FnMut() -> Result<SecretString, FidoError> + 'a {
    move || {
        *asked += 1;
        Ok(SecretString::from(pin))
    }
}

#[test]
fn a_key_with_a_pin_registers_with_its_pin_verified_and_then_signs_on_a_touch() {
    let mut key = PinKey::new(Some(PIN));
    assert!(fido::pin::get_info(&mut key).unwrap().has_pin());
    let mut asked = 0;
    let reg = key
        .register("reg-nonce-0001", &mut typed(PIN, &mut asked))
        .expect("registration with the right PIN");
    // Asked once (and `register` checked the key's verified flag).
    assert_eq!(asked, 1);
    assert_eq!(
        key.sent(fido::pin::CLIENT_PIN),
        2,
        "key agreement, then the token"
    );

    // An approval's touch: presence only, no PIN, and it verifies against the registered key.
    let before = key.sent(fido::pin::CLIENT_PIN);
    let challenge = fido::challenge(VAULT, "act-hash", "nonce-1");
    let t = fido::touch(
        &mut key,
        &challenge,
        std::slice::from_ref(&reg.credential_id),
        &mut typed(PIN, &mut asked),
    )
    .unwrap();
    let public = fido::parse_cose_key(&reg.public_key).unwrap();
    fido::verify_assertion(&public, &challenge, &t.auth_data, &t.signature)
        .expect("the touch verifies");
    assert_eq!(key.sent(fido::pin::CLIENT_PIN), before);
    assert_eq!(
        asked, 1,
        "a touch asks no PIN of a key that does not want it"
    );
}

#[test]
fn a_wrong_pin_registers_nothing_and_says_how_many_tries_are_left() {
    let mut key = PinKey::new(Some(PIN));
    let mut asked = 0;
    let err = key
        .register("reg-nonce-0002", &mut typed("999999", &mut asked))
        .unwrap_err();
    let FidoError::WrongPin(Some(left)) = err else {
        panic!("expected a wrong PIN with the tries left, got {err:?}");
    };
    assert!(left > 0 && left < 8, "{left} tries left");
    assert!(
        err.to_string().contains(&format!("{left} tries left")),
        "{err}"
    );
    assert_eq!(
        key.sent(fido::ctap2::MAKE_CREDENTIAL),
        0,
        "nothing was made"
    );
    // The right PIN afterwards still works.
    key.register("reg-nonce-0003", &mut typed(PIN, &mut asked))
        .unwrap();
    assert_eq!(key.sent(fido::ctap2::MAKE_CREDENTIAL), 1);
}

#[test]
fn no_pin_given_means_nothing_reaches_the_key_past_its_info() {
    let mut key = PinKey::new(Some(PIN));
    let mut refuse = || Err(FidoError::NoPin("no terminal to type it".into()));
    let err = key.register("reg-nonce-0004", &mut refuse).unwrap_err();
    assert!(matches!(err, FidoError::NoPin(_)), "{err:?}");
    assert_eq!(key.commands, [fido::pin::GET_INFO]);
}

#[test]
fn a_key_without_a_pin_is_never_asked_for_one() {
    let mut key = PinKey::new(None);
    assert!(!fido::pin::get_info(&mut key).unwrap().has_pin());
    let mut asked = 0;
    key.register("reg-nonce-0005", &mut typed(PIN, &mut asked))
        .unwrap();
    assert_eq!(asked, 0);
    assert_eq!(key.sent(fido::pin::CLIENT_PIN), 0);
    assert_eq!(key.sent(fido::ctap2::MAKE_CREDENTIAL), 1);
}

#[test]
fn a_key_refuses_to_register_again_for_a_credential_it_already_holds() {
    // The exclude list, as a key applies it (passkey-rs ignores it): registering one key twice
    // is refused by the key itself, not only by the vault's own credential-id check.
    let mut key = PinKey::new(None);
    let mut asked = 0;
    let first = key
        .register("reg-nonce-0006", &mut typed(PIN, &mut asked))
        .unwrap();
    let again = fido::register(
        &mut key,
        VAULT,
        "reg-nonce-0007",
        std::slice::from_ref(&first.credential_id),
        &mut typed(PIN, &mut asked),
    );
    assert!(
        matches!(again, Err(FidoError::AlreadyRegistered)),
        "{again:?}"
    );
}

#[test]
fn a_key_set_to_always_verify_gets_its_pin_at_each_touch_and_nothing_without_it() {
    let mut key = PinKey::with(Some(PIN), true);
    let mut asked = 0;
    let reg = key
        .register("reg-nonce-0008", &mut typed(PIN, &mut asked))
        .unwrap();
    let allow = std::slice::from_ref(&reg.credential_id);
    let public = fido::parse_cose_key(&reg.public_key).unwrap();

    // The key answers that it needs its PIN; it is asked once and the signature verifies, with
    // the verified flag set.
    let c = fido::challenge(VAULT, "act-hash-2", "nonce-2");
    let t = fido::touch(&mut key, &c, allow, &mut typed(PIN, &mut asked)).unwrap();
    assert_eq!(asked, 2);
    let read = fido::verify_assertion(&public, &c, &t.auth_data, &t.signature).unwrap();
    assert!(read.flags & fido::verify::UV != 0, "user verified");

    // No PIN given, or a wrong one: no signature at all.
    let c = fido::challenge(VAULT, "act-hash-3", "nonce-3");
    let mut refuse = || Err(FidoError::NoPin("Esc".into()));
    let err = fido::touch(&mut key, &c, allow, &mut refuse).unwrap_err();
    assert!(matches!(err, FidoError::NoPin(_)), "{err:?}");
    let err = fido::touch(&mut key, &c, allow, &mut typed("999999", &mut asked)).unwrap_err();
    assert!(matches!(err, FidoError::WrongPin(Some(_))), "{err:?}");
}
