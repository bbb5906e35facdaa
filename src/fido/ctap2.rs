//! CTAP2 requests and responses as bytes: `authenticatorMakeCredential` (0x01) and
//! `authenticatorGetAssertion` (0x02) built in canonical CBOR, their responses read back, and the
//! status byte of every response turned into a `FidoError` that says what the person can do. The
//! one place that speaks CTAP2: the USB transport and the tests' software authenticator both
//! carry exactly these bytes.
use super::{FidoError, Transport, RP_ID};
use ciborium::value::{Integer, Value};

/// `authenticatorMakeCredential`.
pub const MAKE_CREDENTIAL: u8 = 0x01;
/// `authenticatorGetAssertion`.
pub const GET_ASSERTION: u8 = 0x02;

/// COSE algorithm ES256 (ECDSA P-256 with SHA-256).
pub const ES256: i64 = -7;
/// COSE algorithm EdDSA (Ed25519).
pub const EDDSA: i64 = -8;

/// What a command carries to show the key a PIN token (`pin::Token::auth`): `pinUvAuthParam`
/// and the PIN/UV auth protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UvAuth {
    pub param: [u8; 32],
    pub protocol: u8,
}

/// What `makeCredential` returned: the authenticator data (which holds the new credential id and
/// its COSE public key) and the attestation format, which is recorded and not checked (the
/// registration is trusted because the person signed it with the passphrase, not because of a
/// vendor certificate).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MadeCredential {
    pub fmt: String,
    pub auth_data: Vec<u8>,
}

/// What `getAssertion` returned: which credential signed (`None` when the request allowed one
/// only and the authenticator left it out), the authenticator data and the signature over
/// `auth_data ‖ client_data_hash`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GotAssertion {
    pub credential_id: Option<Vec<u8>>,
    pub auth_data: Vec<u8>,
    pub signature: Vec<u8>,
}

pub(super) fn int(i: i64) -> Value {
    Value::Integer(Integer::from(i))
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

/// `{"id": …, "type": "public-key"}`, keys in canonical order (shorter first).
fn descriptor(id: &[u8]) -> Value {
    Value::Map(vec![
        (text("id"), Value::Bytes(id.to_vec())),
        (text("type"), text("public-key")),
    ])
}

pub(super) fn encode(v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    ciborium::ser::into_writer(v, &mut out).expect("writing CBOR into memory cannot fail");
    out
}

/// The parameters of `makeCredential` for the vault `user_id`, over `client_data_hash`, refusing
/// the credentials in `exclude` (so a key registered once is not registered again). Asks for
/// user presence, ES256 or EdDSA, and a non-resident credential: the key stores nothing. With
/// `uv`, the key also verifies its person (its PIN, shown by the token's `pinUvAuthParam`).
pub fn make_credential_request(
    client_data_hash: &[u8; 32],
    user_id: &[u8],
    user_name: &str,
    exclude: &[Vec<u8>],
    uv: Option<&UvAuth>,
) -> Vec<u8> {
    let mut map = vec![
        (int(1), Value::Bytes(client_data_hash.to_vec())),
        (
            int(2),
            Value::Map(vec![(text("id"), text(RP_ID)), (text("name"), text(RP_ID))]),
        ),
        (
            int(3),
            Value::Map(vec![
                (text("id"), Value::Bytes(user_id.to_vec())),
                (text("name"), text(user_name)),
                (text("displayName"), text(user_name)),
            ]),
        ),
        (
            int(4),
            Value::Array(
                [ES256, EDDSA]
                    .iter()
                    .map(|a| {
                        Value::Map(vec![
                            (text("alg"), int(*a)),
                            (text("type"), text("public-key")),
                        ])
                    })
                    .collect(),
            ),
        ),
    ];
    if !exclude.is_empty() {
        map.push((
            int(5),
            Value::Array(exclude.iter().map(|id| descriptor(id)).collect()),
        ));
    }
    map.push((int(7), Value::Map(vec![(text("rk"), Value::Bool(false))])));
    push_uv(&mut map, 8, uv);
    encode(&Value::Map(map))
}

/// `pinUvAuthParam` at `at` and its protocol at `at + 1`, when there is a token.
fn push_uv(map: &mut Vec<(Value, Value)>, at: i64, uv: Option<&UvAuth>) {
    if let Some(uv) = uv {
        map.push((int(at), Value::Bytes(uv.param.to_vec())));
        map.push((int(at + 1), int(uv.protocol.into())));
    }
}

/// The parameters of `getAssertion` over `client_data_hash`, for any of `allow` (the registered
/// credentials), with user presence required, and with `uv` the key's PIN token.
pub fn get_assertion_request(
    client_data_hash: &[u8; 32],
    allow: &[Vec<u8>],
    uv: Option<&UvAuth>,
) -> Vec<u8> {
    let mut map = vec![
        (int(1), text(RP_ID)),
        (int(2), Value::Bytes(client_data_hash.to_vec())),
        (
            int(3),
            Value::Array(allow.iter().map(|id| descriptor(id)).collect()),
        ),
        (int(5), Value::Map(vec![(text("up"), Value::Bool(true))])),
    ];
    push_uv(&mut map, 6, uv);
    encode(&Value::Map(map))
}

/// A response's status byte: 0 is success and the CBOR follows; anything else is the
/// authenticator's answer, as an error that says what to do.
pub fn status(response: &[u8]) -> Result<&[u8], FidoError> {
    match response.split_first() {
        None => Err(FidoError::Malformed("an empty response")),
        Some((0, rest)) => Ok(rest),
        Some((&code, _)) => Err(match code {
            // CTAP2_ERR_OPERATION_DENIED, CTAP2_ERR_KEEPALIVE_CANCEL, CTAP2_ERR_ACTION_TIMEOUT,
            // CTAP2_ERR_USER_ACTION_TIMEOUT
            0x27 | 0x2D | 0x3A | 0x2F => FidoError::Refused,
            // CTAP2_ERR_NO_CREDENTIALS
            0x2E => FidoError::NotRegistered,
            // CTAP2_ERR_CREDENTIAL_EXCLUDED
            0x19 => FidoError::AlreadyRegistered,
            // CTAP2_ERR_PUAT_REQUIRED (CTAP 2.0's PIN_REQUIRED): the command needs a PIN token.
            0x36 => FidoError::PinRequired,
            // CTAP2_ERR_PIN_INVALID (the caller asks how many tries are left)
            0x31 => FidoError::WrongPin(None),
            0x32 => FidoError::PinBlocked,
            0x34 => FidoError::PinAuthBlocked,
            0x35 => FidoError::PinNotSet,
            // CTAP2_ERR_PIN_AUTH_INVALID: the token did not authenticate the command.
            0x33 => FidoError::Malformed("a PIN token the key did not accept"),
            // CTAP2_ERR_UNSUPPORTED_ALGORITHM
            0x26 => FidoError::UnsupportedAlgorithm(None),
            other => FidoError::Status(other),
        }),
    }
}

/// The top-level map of a response body, by integer key.
pub(super) fn response_map(body: &[u8]) -> Result<Vec<(i64, Value)>, FidoError> {
    let v: Value = ciborium::de::from_reader(body)
        .map_err(|_| FidoError::Malformed("a response that is not CBOR"))?;
    let Value::Map(entries) = v else {
        return Err(FidoError::Malformed("a response that is not a CBOR map"));
    };
    entries
        .into_iter()
        .map(|(k, v)| match k {
            Value::Integer(i) => i64::try_from(i128::from(i))
                .map(|k| (k, v))
                .map_err(|_| FidoError::Malformed("a response key out of range")),
            _ => Err(FidoError::Malformed(
                "a response key that is not an integer",
            )),
        })
        .collect()
}

pub(super) fn take(entries: &mut Vec<(i64, Value)>, key: i64) -> Option<Value> {
    let at = entries.iter().position(|(k, _)| *k == key)?;
    Some(entries.swap_remove(at).1)
}

pub(super) fn bytes(v: Option<Value>, what: &'static str) -> Result<Vec<u8>, FidoError> {
    match v {
        Some(Value::Bytes(b)) => Ok(b),
        _ => Err(FidoError::Malformed(what)),
    }
}

/// Reads a `makeCredential` response (after its status byte).
pub fn parse_made_credential(body: &[u8]) -> Result<MadeCredential, FidoError> {
    let mut m = response_map(body)?;
    let fmt = match take(&mut m, 1) {
        Some(Value::Text(t)) => t,
        _ => {
            return Err(FidoError::Malformed(
                "a registration with no attestation format",
            ))
        }
    };
    let auth_data = bytes(take(&mut m, 2), "a registration with no authenticator data")?;
    Ok(MadeCredential { fmt, auth_data })
}

/// Reads a `getAssertion` response (after its status byte).
pub fn parse_got_assertion(body: &[u8]) -> Result<GotAssertion, FidoError> {
    let mut m = response_map(body)?;
    let credential_id = match take(&mut m, 1) {
        None => None,
        Some(Value::Map(d)) => Some(
            d.into_iter()
                .find_map(|(k, v)| match (k, v) {
                    (Value::Text(k), Value::Bytes(id)) if k == "id" => Some(id),
                    _ => None,
                })
                .ok_or(FidoError::Malformed("an assertion naming no credential id"))?,
        ),
        Some(_) => {
            return Err(FidoError::Malformed(
                "an assertion's credential is not a map",
            ))
        }
    };
    let auth_data = bytes(take(&mut m, 2), "an assertion with no authenticator data")?;
    let signature = bytes(take(&mut m, 3), "an assertion with no signature")?;
    Ok(GotAssertion {
        credential_id,
        auth_data,
        signature,
    })
}

/// Runs `makeCredential` on `key` and reads its answer.
pub fn make_credential(
    key: &mut dyn Transport,
    client_data_hash: &[u8; 32],
    user_id: &[u8],
    user_name: &str,
    exclude: &[Vec<u8>],
    uv: Option<&UvAuth>,
) -> Result<MadeCredential, FidoError> {
    let request = make_credential_request(client_data_hash, user_id, user_name, exclude, uv);
    let response = key.call(MAKE_CREDENTIAL, &request)?;
    parse_made_credential(status(&response)?)
}

/// Runs `getAssertion` on `key` for any of `allow` and reads its answer; the credential id is
/// filled in when the authenticator left it out (allowed when `allow` names one).
pub fn get_assertion(
    key: &mut dyn Transport,
    client_data_hash: &[u8; 32],
    allow: &[Vec<u8>],
    uv: Option<&UvAuth>,
) -> Result<GotAssertion, FidoError> {
    let request = get_assertion_request(client_data_hash, allow, uv);
    let response = key.call(GET_ASSERTION, &request)?;
    let mut got = parse_got_assertion(status(&response)?)?;
    if got.credential_id.is_none() {
        match allow {
            [only] => got.credential_id = Some(only.clone()),
            _ => return Err(FidoError::Malformed("an assertion naming no credential")),
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_bytes_say_what_happened() {
        assert_eq!(status(&[0, 0xa0]).unwrap(), &[0xa0]);
        assert!(matches!(status(&[0x27]), Err(FidoError::Refused)));
        assert!(matches!(status(&[0x2E]), Err(FidoError::NotRegistered)));
        assert!(matches!(status(&[0x19]), Err(FidoError::AlreadyRegistered)));
        assert!(matches!(status(&[0x36]), Err(FidoError::PinRequired)));
        assert!(matches!(status(&[0x31]), Err(FidoError::WrongPin(None))));
        assert!(matches!(status(&[0x32]), Err(FidoError::PinBlocked)));
        assert!(matches!(status(&[0x7f]), Err(FidoError::Status(0x7f))));
        assert!(matches!(status(&[]), Err(FidoError::Malformed(_))));
    }

    #[test]
    fn requests_are_canonical_cbor_maps_in_key_order() {
        let r = get_assertion_request(&[7; 32], &[vec![1, 2, 3]], None);
        // map(4): 1 => "agent-vault", 2 => bytes(32), 3 => [{"id","type"}], 5 => {"up": true}
        assert_eq!(r[0], 0xa4);
        assert_eq!(&r[1..3], &[0x01, 0x6b]);
        let uv = UvAuth {
            param: [3; 32],
            protocol: 2,
        };
        let m = make_credential_request(&[7; 32], b"vault", "agent-vault v", &[vec![9]], Some(&uv));
        let v: Value = ciborium::de::from_reader(m.as_slice()).unwrap();
        let Value::Map(entries) = v else { panic!() };
        let keys: Vec<i64> = entries
            .iter()
            .map(|(k, _)| i64::try_from(i128::from(k.as_integer().unwrap())).unwrap())
            .collect();
        assert_eq!(keys, [1, 2, 3, 4, 5, 7, 8, 9]);
    }
}
