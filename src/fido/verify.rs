//! Checking what a key signed, with no key and no device: authenticator data read field by field,
//! a COSE public key (ES256 or EdDSA) read from its CBOR, and an assertion verified against it
//! (`p256`, `ed25519-dalek`): the relying party is agent-vault's, the person was present, and
//! the signature covers `authenticator data ‖ client data hash`. What the hash must be, and
//! whether a counter went backwards, is the caller's (`challenge`, `counter_moved_on`).
use super::{FidoError, RP_ID};
use ciborium::value::Value;
use sha2::{Digest, Sha256};

/// authenticatorData flag: the user was present (touched the key).
pub const UP: u8 = 0x01;
/// authenticatorData flag: the user was verified (PIN or biometric on the key).
pub const UV: u8 = 0x04;
/// authenticatorData flag: attested credential data follows the counter.
const AT: u8 = 0x40;

/// Authenticator data, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthData {
    pub rp_id_hash: [u8; 32],
    pub flags: u8,
    pub counter: u32,
    /// Present in a registration: the new credential.
    pub credential: Option<AttestedCredential>,
}

/// The credential a registration made: its id and its public key as COSE CBOR bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttestedCredential {
    pub aaguid: [u8; 16],
    pub id: Vec<u8>,
    pub public_key: Vec<u8>,
}

/// A public key a credential signs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublicKey {
    /// ECDSA P-256, SEC1 uncompressed point (`04 ‖ x ‖ y`).
    Es256(Vec<u8>),
    /// Ed25519.
    EdDsa([u8; 32]),
}

impl PublicKey {
    /// The COSE algorithm name people see: `ES256` or `EdDSA`.
    pub fn algorithm(&self) -> &'static str {
        match self {
            PublicKey::Es256(_) => "ES256",
            PublicKey::EdDsa(_) => "EdDSA",
        }
    }
}

/// sha256 of agent-vault's relying party id: what every authenticator data must start with.
pub fn rp_id_hash() -> [u8; 32] {
    Sha256::digest(RP_ID.as_bytes()).into()
}

/// Reads authenticator data: rpIdHash (32), flags (1), signCount (4, big-endian), then, where
/// the AT flag says so, aaguid (16), credential id length (2) and id, and the COSE key.
pub fn parse_auth_data(data: &[u8]) -> Result<AuthData, FidoError> {
    if data.len() < 37 {
        return Err(FidoError::Malformed(
            "authenticator data shorter than 37 bytes",
        ));
    }
    let rp_id_hash: [u8; 32] = data[..32].try_into().expect("32 bytes");
    let flags = data[32];
    let counter = u32::from_be_bytes(data[33..37].try_into().expect("4 bytes"));
    let credential = if flags & AT != 0 {
        let rest = &data[37..];
        if rest.len() < 18 {
            return Err(FidoError::Malformed("attested credential data cut short"));
        }
        let aaguid: [u8; 16] = rest[..16].try_into().expect("16 bytes");
        let len = usize::from(u16::from_be_bytes([rest[16], rest[17]]));
        let after = &rest[18..];
        if after.len() < len {
            return Err(FidoError::Malformed("a credential id longer than its data"));
        }
        let (id, key) = after.split_at(len);
        let mut cursor = std::io::Cursor::new(key);
        let _: Value = ciborium::de::from_reader(&mut cursor)
            .map_err(|_| FidoError::Malformed("a credential public key that is not CBOR"))?;
        let used = usize::try_from(cursor.position()).expect("within the slice");
        Some(AttestedCredential {
            aaguid,
            id: id.to_vec(),
            public_key: key[..used].to_vec(),
        })
    } else {
        None
    };
    Ok(AuthData {
        rp_id_hash,
        flags,
        counter,
        credential,
    })
}

fn cose_int(v: &Value) -> Option<i64> {
    match v {
        Value::Integer(i) => i64::try_from(i128::from(*i)).ok(),
        _ => None,
    }
}

/// Reads a COSE_Key: EC2 (kty 2) on P-256 (crv 1) with alg ES256, or OKP (kty 1) on Ed25519
/// (crv 6) with alg EdDSA. Anything else is refused by name.
pub fn parse_cose_key(cose: &[u8]) -> Result<PublicKey, FidoError> {
    let v: Value = ciborium::de::from_reader(cose)
        .map_err(|_| FidoError::Malformed("a public key that is not CBOR"))?;
    let Value::Map(entries) = v else {
        return Err(FidoError::Malformed("a public key that is not a COSE map"));
    };
    let get = |k: i64| {
        entries
            .iter()
            .find(|(key, _)| cose_int(key) == Some(k))
            .map(|e| &e.1)
    };
    let int = |k: i64| get(k).and_then(cose_int);
    let bytes = |k: i64| match get(k) {
        Some(Value::Bytes(b)) => Some(b.as_slice()),
        _ => None,
    };
    let alg = int(3);
    match (int(1), alg, int(-1)) {
        (Some(2), Some(super::ctap2::ES256), Some(1)) => {
            let (Some(x), Some(y)) = (bytes(-2), bytes(-3)) else {
                return Err(FidoError::Malformed("an ES256 key without x and y"));
            };
            if x.len() != 32 || y.len() != 32 {
                return Err(FidoError::Malformed("an ES256 key with the wrong size"));
            }
            let mut point = Vec::with_capacity(65);
            point.push(0x04);
            point.extend_from_slice(x);
            point.extend_from_slice(y);
            p256::ecdsa::VerifyingKey::from_sec1_bytes(&point)
                .map_err(|_| FidoError::Malformed("an ES256 key that is not on the curve"))?;
            Ok(PublicKey::Es256(point))
        }
        (Some(1), Some(super::ctap2::EDDSA), Some(6)) => {
            let x: [u8; 32] = bytes(-2)
                .and_then(|x| x.try_into().ok())
                .ok_or(FidoError::Malformed("an Ed25519 key with the wrong size"))?;
            ed25519_dalek::VerifyingKey::from_bytes(&x)
                .map_err(|_| FidoError::Malformed("an Ed25519 key that is not a point"))?;
            Ok(PublicKey::EdDsa(x))
        }
        _ => Err(FidoError::UnsupportedAlgorithm(alg)),
    }
}

/// Verifies one assertion: `auth_data` is for agent-vault's relying party, says the person was
/// present, and `signature` is `key`'s over `auth_data ‖ client_data_hash`. Returns the
/// authenticator data, whose counter the caller compares with the last one it saw.
pub fn verify_assertion(
    key: &PublicKey,
    client_data_hash: &[u8; 32],
    auth_data: &[u8],
    signature: &[u8],
) -> Result<AuthData, FidoError> {
    let parsed = parse_auth_data(auth_data)?;
    if parsed.rp_id_hash != rp_id_hash() {
        return Err(FidoError::WrongRelyingParty);
    }
    let mut signed = Vec::with_capacity(auth_data.len() + 32);
    signed.extend_from_slice(auth_data);
    signed.extend_from_slice(client_data_hash);
    let ok = match key {
        PublicKey::Es256(point) => {
            use p256::ecdsa::signature::Verifier;
            let vk = p256::ecdsa::VerifyingKey::from_sec1_bytes(point)
                .map_err(|_| FidoError::BadSignature)?;
            let sig =
                p256::ecdsa::Signature::from_der(signature).map_err(|_| FidoError::BadSignature)?;
            vk.verify(&signed, &sig).is_ok()
        }
        PublicKey::EdDsa(x) => {
            let vk =
                ed25519_dalek::VerifyingKey::from_bytes(x).map_err(|_| FidoError::BadSignature)?;
            let sig = ed25519_dalek::Signature::from_slice(signature)
                .map_err(|_| FidoError::BadSignature)?;
            vk.verify_strict(&signed, &sig).is_ok()
        }
    };
    if !ok {
        return Err(FidoError::BadSignature);
    }
    // Checked after the signature, so a forged row is reported as forged, not as untouched.
    if parsed.flags & UP == 0 {
        return Err(FidoError::NotPresent);
    }
    Ok(parsed)
}

/// Whether a credential's signature counter moved on from the last one seen: it must grow,
/// except that a key that keeps no counter reports 0 every time. A counter that goes back means
/// two devices hold the credential (a cloned key) or an old assertion was replayed.
pub fn counter_moved_on(last: Option<u32>, now: u32) -> bool {
    match last {
        None => true,
        Some(0) if now == 0 => true,
        Some(last) => now > last,
    }
}
