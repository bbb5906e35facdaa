//! FIDO2 security keys: registering one and asking it to sign a touch for one action, and checking
//! what it signed. The protocol (`ctap2`: requests and responses as CBOR bytes; `verify`:
//! authenticator data, COSE keys, signatures) knows no transport: it hands bytes to a
//! `Transport`, which is the USB key (`hid`) in the product and a software authenticator in the
//! tests, both carrying the same bytes. A leaf: it knows nothing of the vault but the challenge
//! fields it is given.
pub mod ctap2;
pub mod hid;
pub mod pin;
pub mod verify;

pub use verify::{counter_moved_on, parse_cose_key, verify_assertion, PublicKey};

/// The relying party every agent-vault credential is made for.
pub const RP_ID: &str = "agent-vault";

/// Something that carries one CTAP2 command to an authenticator and brings its response back:
/// `command` is the CTAP2 command byte, `cbor` its parameters; the answer is the response as the
/// authenticator sent it (status byte first). The transport adds and removes its own framing
/// only; what the bytes mean is `ctap2`'s.
pub trait Transport {
    fn call(&mut self, command: u8, cbor: &[u8]) -> Result<Vec<u8>, FidoError>;
}

/// What can go wrong with a key, each saying what to do next. None of them means anything was
/// approved.
#[derive(Debug, thiserror::Error)]
pub enum FidoError {
    #[error("no FIDO2 security key found: plug one in (on USB) and try again; if it is plugged in, check that this user may open /dev/hidraw* (a udev rule for FIDO keys, as from the libfido2 or u2f-udev packages)")]
    NoDevice,
    #[error("the security key at {path} could not be used ({source}); unplug it, plug it in again and retry")]
    Device {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the security key was not touched within {0} seconds; nothing was approved")]
    Timeout(u64),
    #[error("the security key refused (not touched, or the request was cancelled); nothing was approved")]
    Refused,
    #[error("this security key holds none of the vault's registered credentials: use a key listed by `vault approver keys`")]
    NotRegistered,
    #[error("this security key is already registered with this vault (`vault approver keys`)")]
    AlreadyRegistered,
    #[error("the security key still asks for its PIN after it was given one; unplug it, plug it in again and retry")]
    PinRequired,
    #[error("wrong PIN for the security key{}; nothing was registered or approved", .0.map_or(String::new(), |n| format!(" ({n} tries left before it locks)")))]
    WrongPin(Option<u8>),
    #[error("the security key's PIN is blocked after too many wrong tries; only a reset of the key unblocks it, and a reset deletes its credentials (register it again afterwards)")]
    PinBlocked,
    #[error("the security key refuses PINs after three wrong ones in a row: unplug it, plug it in again, and retry")]
    PinAuthBlocked,
    #[error("the security key needs a PIN and has none: set one with the key's own tool (for example `ykman fido access change-pin` or `fido2-token -S`), then retry")]
    PinNotSet,
    #[error("the security key speaks PIN/UV auth protocol {0:?}; agent-vault speaks protocol 2 (CTAP 2.1): use a key with newer firmware, or remove its PIN")]
    PinProtocol(Vec<u8>),
    #[error("no PIN was given for the security key: {0}")]
    NoPin(String),
    #[error("the security key registered without verifying its PIN (no user-verified flag)")]
    NotVerified,
    #[error("the security key offered an algorithm agent-vault does not check ({}); it accepts ES256 and EdDSA", .0.map_or("none".to_owned(), |a| a.to_string()))]
    UnsupportedAlgorithm(Option<i64>),
    #[error("the security key answered with CTAP2 status 0x{0:02x}; try again, or another key")]
    Status(u8),
    #[error("the security key sent {0}; try again, or another key")]
    Malformed(&'static str),
    #[error("the signature is not the registered key's over this action")]
    BadSignature,
    #[error("the assertion was made for another relying party than agent-vault")]
    WrongRelyingParty,
    #[error("the key signed without a touch (no user-presence flag)")]
    NotPresent,
}

/// A registered credential, as a registration returned it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    pub credential_id: Vec<u8>,
    /// The COSE_Key CBOR bytes, as the key sent them.
    pub public_key: Vec<u8>,
    pub algorithm: &'static str,
    pub aaguid: [u8; 16],
    pub counter: u32,
    /// The attestation format (recorded, not checked).
    pub fmt: String,
}

/// A touch: which credential signed, its authenticator data and signature, and the counter
/// read from that data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Touch {
    pub credential_id: Vec<u8>,
    pub auth_data: Vec<u8>,
    pub signature: Vec<u8>,
    pub counter: u32,
}

fn derive(context: &str, fields: &[&[u8]]) -> [u8; 32] {
    let mut h = blake3::Hasher::new_derive_key(context);
    for f in fields {
        h.update(&(f.len() as u64).to_le_bytes());
        h.update(f);
    }
    *h.finalize().as_bytes()
}

/// The client data hash a key signs to approve one action: bound to the vault, the action hash
/// the approver derived, and the decision's nonce (so a touch is good for one decision only).
pub fn challenge(vault_id: &str, action_hash: &str, nonce: &str) -> [u8; 32] {
    derive(
        "agent-vault 2026-12 approval touch v1",
        &[
            vault_id.as_bytes(),
            action_hash.as_bytes(),
            nonce.as_bytes(),
        ],
    )
}

/// The client data hash of a registration: the vault and the registration's nonce.
pub fn registration_challenge(vault_id: &str, nonce: &str) -> [u8; 32] {
    derive(
        "agent-vault 2026-12 key registration v1",
        &[vault_id.as_bytes(), nonce.as_bytes()],
    )
}

/// Where a key's PIN comes from when the key has one: asked at the moment it is needed, never
/// kept. `Err` (no terminal, nothing typed) stops with nothing registered.
pub type AskPin<'a> = &'a mut dyn FnMut() -> Result<secrecy::SecretString, FidoError>;

/// Registers a new credential on `key` for the vault `vault_id` (the key wants a touch, and,
/// when it has a PIN, the PIN: `ask_pin` is called then, once), refusing a key that already
/// holds one of `exclude`. The answer is checked: agent-vault's relying party, a touch (and the
/// verified flag when a PIN was given), a credential with an ES256 or EdDSA key.
pub fn register(
    key: &mut dyn Transport,
    vault_id: &str,
    nonce: &str,
    exclude: &[Vec<u8>],
    ask_pin: AskPin<'_>,
) -> Result<Registration, FidoError> {
    let hash = registration_challenge(vault_id, nonce);
    let name = format!("agent-vault {}", vault_id.get(..12).unwrap_or(vault_id));
    let info = pin::get_info(key)?;
    let uv = if info.has_pin() {
        let secret = ask_pin()?;
        Some(pin::token(key, &info, &secret, pin::PERMISSION_MAKE_CREDENTIAL)?.auth(&hash))
    } else {
        None
    };
    let made =
        ctap2::make_credential(key, &hash, vault_id.as_bytes(), &name, exclude, uv.as_ref())?;
    let data = verify::parse_auth_data(&made.auth_data)?;
    if data.rp_id_hash != verify::rp_id_hash() {
        return Err(FidoError::WrongRelyingParty);
    }
    if data.flags & verify::UP == 0 {
        return Err(FidoError::NotPresent);
    }
    if uv.is_some() && data.flags & verify::UV == 0 {
        return Err(FidoError::NotVerified);
    }
    let cred = data
        .credential
        .ok_or(FidoError::Malformed("a registration with no credential"))?;
    let public = parse_cose_key(&cred.public_key)?;
    Ok(Registration {
        credential_id: cred.id,
        public_key: cred.public_key,
        algorithm: public.algorithm(),
        aaguid: cred.aaguid,
        counter: data.counter,
        fmt: made.fmt,
    })
}

/// Asks `key` to sign `challenge` with any of `allow` (the key wants a touch). A key set to verify
/// its person for every signature (alwaysUv) answers that it needs its PIN: `ask_pin` is called
/// then, once, and the request is sent again with a token for `getAssertion`. The answer is
/// read, not trusted: whoever acts on it checks it with `verify_assertion` against the key it
/// names.
pub fn touch(
    key: &mut dyn Transport,
    challenge: &[u8; 32],
    allow: &[Vec<u8>],
    ask_pin: AskPin<'_>,
) -> Result<Touch, FidoError> {
    let got = match ctap2::get_assertion(key, challenge, allow, None) {
        Err(FidoError::PinRequired) => {
            let info = pin::get_info(key)?;
            if !info.has_pin() {
                return Err(FidoError::PinNotSet);
            }
            let secret = ask_pin()?;
            let token = pin::token(key, &info, &secret, pin::PERMISSION_GET_ASSERTION)?;
            ctap2::get_assertion(key, challenge, allow, Some(&token.auth(challenge)))?
        }
        other => other?,
    };
    let data = verify::parse_auth_data(&got.auth_data)?;
    Ok(Touch {
        credential_id: got.credential_id.expect("filled in by get_assertion"),
        auth_data: got.auth_data,
        signature: got.signature,
        counter: data.counter,
    })
}
