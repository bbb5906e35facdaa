//! A software FIDO2 authenticator (1Password's `passkey-authenticator`) behind `fido::Transport`:
//! the CBOR agent-vault builds goes in and is decoded into passkey-types' requests, and the
//! authenticator's response comes back as CBOR, status byte first: the bytes a USB key carries.
//! Its finger can be lifted (`touches`), and its credentials copied and put back (a cloned key).
use agent_vault::fido::{FidoError, Transport};
use passkey_authenticator::{Authenticator, MemoryStore, UiHint, UserCheck, UserValidationMethod};
use passkey_crypto::coset::iana;
use passkey_crypto::rust_crypto::RustCryptoBackend;
use passkey_types::ctap2::{get_assertion, make_credential, Aaguid, Ctap2Error};
use passkey_types::Passkey;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// What `fido::register` is given for a key without a PIN: it is never called.
pub fn no_pin() -> Result<secrecy::SecretString, FidoError> {
    Err(FidoError::NoPin(
        "a key with no PIN was asked for one".into(),
    ))
}

/// The person's finger on the key: touches, or does not.
pub struct Finger(Arc<AtomicBool>);

#[async_trait::async_trait]
impl UserValidationMethod for Finger {
    type PasskeyItem = Passkey;

    async fn check_user<'a>(
        &self,
        _hint: UiHint<'a, Passkey>,
        presence: bool,
        _verification: bool,
    ) -> Result<UserCheck, Ctap2Error> {
        if self.0.load(Ordering::SeqCst) {
            Ok(UserCheck {
                presence,
                verification: false,
            })
        } else {
            Err(Ctap2Error::OperationDenied)
        }
    }

    fn is_presence_enabled(&self) -> bool {
        true
    }

    fn is_verification_enabled(&self) -> Option<bool> {
        None
    }
}

/// One software key.
pub struct SoftKey {
    auth: Authenticator<MemoryStore, Finger, RustCryptoBackend>,
    rt: tokio::runtime::Runtime,
    /// Whether the finger is on the key.
    pub touches: Arc<AtomicBool>,
    /// Commands received (what "nothing reached the key" counts).
    pub calls: Arc<AtomicUsize>,
}

impl SoftKey {
    /// A key that signs with ES256 (`iana::Algorithm::ES256`) or EdDSA, with a counter.
    pub fn new(alg: iana::Algorithm) -> Self {
        Self::with_counter(alg, true)
    }

    /// An ES256 key that keeps no signature counter: every touch reports 0, as some keys do.
    pub fn es256_without_counter() -> Self {
        Self::with_counter(iana::Algorithm::ES256, false)
    }

    fn with_counter(alg: iana::Algorithm, counter: bool) -> Self {
        let touches = Arc::new(AtomicBool::new(true));
        let mut auth = Authenticator::new(
            Aaguid::new_empty(),
            MemoryStore::new(),
            Finger(touches.clone()),
            RustCryptoBackend,
        );
        auth.set_algorithms(&[alg]).expect("a supported algorithm");
        auth.set_make_credentials_with_signature_counter(counter);
        Self {
            auth,
            rt: tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a runtime"),
            touches,
            calls: Arc::new(AtomicUsize::new(0)),
        }
    }

    pub fn es256() -> Self {
        Self::new(iana::Algorithm::ES256)
    }

    pub fn eddsa() -> Self {
        Self::new(iana::Algorithm::EdDSA)
    }

    /// The credentials it holds (to put back later, as a clone of the key would be).
    pub fn snapshot(&self) -> MemoryStore {
        self.auth.store().clone()
    }

    pub fn restore(&mut self, store: MemoryStore) {
        *self.auth.store_mut() = store;
    }
}

fn cbor<T: serde::Serialize>(status_ok: &T) -> Vec<u8> {
    let mut out = vec![0u8];
    ciborium::ser::into_writer(status_ok, &mut out).expect("CBOR into memory");
    out
}

impl Transport for SoftKey {
    fn call(&mut self, command: u8, body: &[u8]) -> Result<Vec<u8>, FidoError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        // CTAP1_ERR_INVALID_COMMAND / CTAP2_ERR_INVALID_CBOR, as a key answers them.
        let out = match command {
            0x01 => match ciborium::de::from_reader::<make_credential::Request, _>(body) {
                Err(_) => vec![0x12],
                Ok(req) => match self.rt.block_on(self.auth.make_credential(req)) {
                    Ok(resp) => cbor(&resp),
                    Err(code) => vec![u8::from(code)],
                },
            },
            0x02 => match ciborium::de::from_reader::<get_assertion::Request, _>(body) {
                Err(_) => vec![0x12],
                Ok(req) => match self.rt.block_on(self.auth.get_assertion(req)) {
                    Ok(resp) => cbor(&resp),
                    Err(code) => vec![u8::from(code)],
                },
            },
            0x04 => cbor(&*self.rt.block_on(self.auth.get_info())),
            _ => vec![0x01],
        };
        Ok(out)
    }
}
