//! A security key's PIN: `authenticatorGetInfo` (0x04) says whether the key has one, and
//! `authenticatorClientPIN` (0x06) with PIN/UV auth protocol 2 (CTAP 2.1 §6.5.7) turns the PIN
//! into a token the key checks, for one command. The PIN goes to the key encrypted under an ECDH
//! secret the two share for this exchange only (P-256, HKDF-SHA-256, AES-256-CBC); what agent-vault
//! keeps of it is nothing: the PIN and the token are zeroized once the command is sent.
//! Like `ctap2`, it speaks bytes to a `Transport` and knows nothing of USB.
use super::ctap2::{self, encode, int, response_map, take, UvAuth};
use super::{FidoError, Transport, RP_ID};
use aes::Aes256;
use cbc::cipher::block_padding::NoPadding;
use cbc::cipher::{BlockModeDecrypt, BlockModeEncrypt, KeyIvInit};
use ciborium::value::Value;
use hmac::{Hmac, KeyInit, Mac};
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

/// `authenticatorGetInfo`.
pub const GET_INFO: u8 = 0x04;
/// `authenticatorClientPIN`.
pub const CLIENT_PIN: u8 = 0x06;
/// The only PIN/UV auth protocol agent-vault speaks.
pub const PROTOCOL: u8 = 2;
/// The permission a token needs for `makeCredential`.
pub const PERMISSION_MAKE_CREDENTIAL: u8 = 0x01;
/// The permission a token needs for `getAssertion`.
pub const PERMISSION_GET_ASSERTION: u8 = 0x02;

const GET_PIN_RETRIES: u8 = 0x01;
const GET_KEY_AGREEMENT: u8 = 0x02;
const GET_PIN_TOKEN: u8 = 0x05;
const GET_TOKEN_WITH_PERMISSIONS: u8 = 0x09;

/// What a key says of itself that decides whether, and how, to ask for its PIN.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Info {
    /// `clientPin`: `Some(true)` when a PIN is set, `Some(false)` when one could be, `None` when
    /// the key has no PIN at all.
    pub client_pin: Option<bool>,
    /// `pinUvAuthToken`: the key takes tokens with permissions (CTAP 2.1).
    pub permissions: bool,
    /// The PIN/UV auth protocols the key speaks.
    pub protocols: Vec<u8>,
}

impl Info {
    /// Whether the key has a PIN set, and so verifies its person at registration.
    pub fn has_pin(&self) -> bool {
        self.client_pin == Some(true)
    }
}

/// Asks `key` what it is (`authenticatorGetInfo`).
pub fn get_info(key: &mut dyn Transport) -> Result<Info, FidoError> {
    let response = key.call(GET_INFO, &[])?;
    parse_info(ctap2::status(&response)?)
}

/// Reads a `getInfo` response (after its status byte): options (0x04) and protocols (0x06).
pub fn parse_info(body: &[u8]) -> Result<Info, FidoError> {
    let mut m = response_map(body)?;
    let mut info = Info::default();
    if let Some(options) = take(&mut m, 4) {
        let Value::Map(options) = options else {
            return Err(FidoError::Malformed("a key whose options are not a map"));
        };
        for (k, v) in options {
            let (Value::Text(k), Value::Bool(on)) = (k, v) else {
                continue;
            };
            match k.as_str() {
                "clientPin" => info.client_pin = Some(on),
                "pinUvAuthToken" => info.permissions = on,
                _ => {}
            }
        }
    }
    if let Some(Value::Array(protocols)) = take(&mut m, 6) {
        info.protocols = protocols
            .iter()
            .filter_map(|p| p.as_integer().and_then(|i| u8::try_from(i).ok()))
            .collect();
    }
    Ok(info)
}

/// A PIN/UV auth token, good for the commands its permissions name until the key forgets it.
pub struct Token(Zeroizing<Vec<u8>>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token([redacted])")
    }
}

impl Token {
    /// `pinUvAuthParam` over `client_data_hash`: HMAC-SHA-256 under the token, all 32 bytes.
    pub fn auth(&self, client_data_hash: &[u8; 32]) -> UvAuth {
        UvAuth {
            param: hmac(&self.0, client_data_hash),
            protocol: PROTOCOL,
        }
    }
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// The secret this exchange shares with the key: protocol 2's AES key (its KDF's HMAC key is for
/// commands that authenticate a PIN change, which agent-vault never sends), and the COSE key of
/// our half of the ECDH, for the key to compute the same.
struct Shared {
    aes_key: Zeroizing<[u8; 32]>,
    platform_key: Value,
}

impl Shared {
    /// `getKeyAgreement`, then ECDH with a fresh P-256 key of ours.
    fn agree(key: &mut dyn Transport) -> Result<Self, FidoError> {
        let response = key.call(CLIENT_PIN, &command(GET_KEY_AGREEMENT, vec![]))?;
        let mut m = response_map(ctap2::status(&response)?)?;
        let theirs = take(&mut m, 1).ok_or(FidoError::Malformed("no key agreement key"))?;
        let theirs = ec2_point(theirs)?;
        let ours = loop {
            let mut d = Zeroizing::new([0u8; 32]);
            getrandom::fill(&mut *d).expect("the OS random number generator failed");
            if let Ok(k) = p256::SecretKey::from_bytes(&(*d).into()) {
                break k;
            }
        };
        let z = p256::ecdh::diffie_hellman(ours.to_nonzero_scalar(), theirs.as_affine());
        let kdf = hkdf::Hkdf::<Sha256>::new(Some(&[0u8; 32]), z.raw_secret_bytes());
        let mut aes_key = Zeroizing::new([0u8; 32]);
        kdf.expand(b"CTAP2 AES key", &mut *aes_key)
            .expect("32 bytes of HKDF-SHA-256");
        use p256::elliptic_curve::sec1::ToSec1Point;
        let point = ours.public_key().to_sec1_point(false);
        let (x, y) = (
            point.x().expect("uncompressed"),
            point.y().expect("uncompressed"),
        );
        // COSE_Key, canonical order: 1 (kty EC2), 3 (alg ECDH-ES+HKDF-256), -1 (crv P-256), -2, -3.
        let platform_key = Value::Map(vec![
            (int(1), int(2)),
            (int(3), int(-25)),
            (int(-1), int(1)),
            (int(-2), Value::Bytes(x.to_vec())),
            (int(-3), Value::Bytes(y.to_vec())),
        ]);
        Ok(Self {
            aes_key,
            platform_key,
        })
    }

    /// Protocol 2's encrypt: a random IV, then AES-256-CBC with no padding (whole blocks only).
    fn encrypt(&self, plain: &[u8]) -> Vec<u8> {
        let mut iv = [0u8; 16];
        getrandom::fill(&mut iv).expect("the OS random number generator failed");
        let mut out = vec![0u8; 16 + plain.len()];
        out[..16].copy_from_slice(&iv);
        cbc::Encryptor::<Aes256>::new((&*self.aes_key).into(), (&iv).into())
            .encrypt_padded_b2b::<NoPadding>(plain, &mut out[16..])
            .expect("whole blocks");
        out
    }

    fn decrypt(&self, sealed: &[u8]) -> Result<Zeroizing<Vec<u8>>, FidoError> {
        let bad = FidoError::Malformed("a PIN token that does not decrypt");
        if sealed.len() < 32 || !sealed.len().is_multiple_of(16) {
            return Err(bad);
        }
        let (iv, ct) = sealed.split_at(16);
        let iv: &[u8; 16] = iv.try_into().expect("16 bytes");
        let mut out = Zeroizing::new(vec![0u8; ct.len()]);
        cbc::Decryptor::<Aes256>::new((&*self.aes_key).into(), iv.into())
            .decrypt_padded_b2b::<NoPadding>(ct, &mut out)
            .map_err(|_| bad)?;
        Ok(out)
    }
}

/// An EC2 P-256 COSE key (the key's half of the agreement) as a point on the curve.
fn ec2_point(v: Value) -> Result<p256::PublicKey, FidoError> {
    let bad = FidoError::Malformed("a key agreement key that is not a P-256 point");
    let Value::Map(entries) = v else {
        return Err(bad);
    };
    let coord = |want: i64| {
        entries.iter().find_map(|(k, v)| match (k.as_integer(), v) {
            (Some(k), Value::Bytes(b)) if i128::from(k) == i128::from(want) && b.len() == 32 => {
                Some(b.as_slice())
            }
            _ => None,
        })
    };
    let (Some(x), Some(y)) = (coord(-2), coord(-3)) else {
        return Err(bad);
    };
    let mut sec1 = [0u8; 65];
    sec1[0] = 4;
    sec1[1..33].copy_from_slice(x);
    sec1[33..].copy_from_slice(y);
    p256::PublicKey::from_sec1_bytes(&sec1).map_err(|_| bad)
}

/// A `clientPIN` request: protocol 2, `sub`, then the members that follow (keys above 2, in order).
fn command(sub: u8, rest: Vec<(Value, Value)>) -> Vec<u8> {
    let mut map = vec![(int(1), int(PROTOCOL.into())), (int(2), int(sub.into()))];
    map.extend(rest);
    encode(&Value::Map(map))
}

/// How many wrong PINs the key still takes before it blocks (`None` if it does not say).
pub fn retries(key: &mut dyn Transport) -> Option<u8> {
    let response = key
        .call(CLIENT_PIN, &command(GET_PIN_RETRIES, vec![]))
        .ok()?;
    let mut m = response_map(ctap2::status(&response).ok()?).ok()?;
    take(&mut m, 3)?
        .as_integer()
        .and_then(|i| u8::try_from(i).ok())
}

/// Turns `pin` into a token for `permissions` on agent-vault's relying party (on a CTAP 2.0 key,
/// which has no permissions, a token for everything). A wrong PIN says how many tries are left.
pub fn token(
    key: &mut dyn Transport,
    info: &Info,
    pin: &SecretString,
    permissions: u8,
) -> Result<Token, FidoError> {
    if !info.protocols.contains(&PROTOCOL) {
        return Err(FidoError::PinProtocol(info.protocols.clone()));
    }
    let shared = Shared::agree(key)?;
    // LEFT(SHA-256(PIN), 16): as good as the PIN to whoever reads it, so wiped after use.
    let digest: Zeroizing<[u8; 32]> =
        Zeroizing::new(Sha256::digest(pin.expose_secret().as_bytes()).into());
    let pin_hash_enc = shared.encrypt(&digest[..16]);
    let mut rest = vec![
        (int(3), shared.platform_key.clone()),
        (int(6), Value::Bytes(pin_hash_enc)),
    ];
    let sub = if info.permissions {
        rest.push((int(9), int(permissions.into())));
        rest.push((int(10), Value::Text(RP_ID.to_owned())));
        GET_TOKEN_WITH_PERMISSIONS
    } else {
        GET_PIN_TOKEN
    };
    let response = key.call(CLIENT_PIN, &command(sub, rest))?;
    let body = match ctap2::status(&response) {
        Err(FidoError::WrongPin(_)) => return Err(FidoError::WrongPin(retries(key))),
        other => other?,
    };
    let mut m = response_map(body)?;
    let sealed = ctap2::bytes(take(&mut m, 2), "no PIN token in the key's answer")?;
    Ok(Token(shared.decrypt(&sealed)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_info_reads_the_pin_options_and_protocols() {
        // {4: {"rk": true, "clientPin": true, "pinUvAuthToken": true}, 6: [2, 1]}
        let body = encode(&Value::Map(vec![
            (
                int(4),
                Value::Map(vec![
                    (Value::Text("rk".into()), Value::Bool(true)),
                    (Value::Text("clientPin".into()), Value::Bool(true)),
                    (Value::Text("pinUvAuthToken".into()), Value::Bool(true)),
                ]),
            ),
            (int(6), Value::Array(vec![int(2), int(1)])),
        ]));
        let info = parse_info(&body).unwrap();
        assert!(info.has_pin() && info.permissions);
        assert_eq!(info.protocols, [2, 1]);
        let none = parse_info(&encode(&Value::Map(vec![]))).unwrap();
        assert!(!none.has_pin() && none.client_pin.is_none());
    }

    #[test]
    fn a_token_debugs_redacted() {
        let t = Token(Zeroizing::new(vec![0x41; 32]));
        assert_eq!(format!("{t:?}"), "Token([redacted])");
    }
}
