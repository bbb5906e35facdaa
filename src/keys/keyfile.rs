//! `vault.key.age`: the master key and approver seed as documented JSON, encrypted with age to the
//! person's passphrase (scrypt), so the stock `age` CLI can always recover them.
use super::{ApproverKey, KeyMaterial, MasterKey, Passphrase};
use serde::Deserialize;
use zeroize::Zeroizing;

/// Errors wrapping or unwrapping the key file.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("wrong passphrase for vault.key.age (nothing was changed); try again, or restore the file from your backup")]
    WrongPassphrase,
    #[error("vault.key.age is not a valid age file ({0}); restore it from your backup")]
    Corrupt(String),
    #[error("vault.key.age decrypted but does not hold the documented key JSON ({0}); restore it from your backup")]
    BadContents(&'static str),
    #[error("cannot encrypt the key file: {0}")]
    Encrypt(String),
}

#[derive(Deserialize)]
struct KeyJson {
    version: u32,
    master_key: Zeroizing<String>,
    approver_key: Zeroizing<String>,
}

/// The plaintext JSON, exactly as docs/design.md §3 documents it.
fn plaintext(keys: &KeyMaterial) -> Zeroizing<String> {
    Zeroizing::new(format!(
        "{{\"version\":1,\"master_key\":\"{}\",\"approver_key\":\"{}\"}}\n",
        keys.master.to_hex().as_str(),
        keys.approver.seed_hex().as_str()
    ))
}

/// Encrypts the key material to the passphrase with age's scrypt recipient (default work factor).
pub fn wrap_key_file(keys: &KeyMaterial, passphrase: &Passphrase) -> Result<Vec<u8>, KeyFileError> {
    let recipient = age::scrypt::Recipient::new(passphrase.secret().clone());
    let text = plaintext(keys);
    age::encrypt(&recipient, text.as_bytes()).map_err(|e| KeyFileError::Encrypt(e.to_string()))
}

/// Decrypts and parses the key file.
pub fn unwrap_key_file(bytes: &[u8], passphrase: &Passphrase) -> Result<KeyMaterial, KeyFileError> {
    let identity = age::scrypt::Identity::new(passphrase.secret().clone());
    let plain = Zeroizing::new(age::decrypt(&identity, bytes).map_err(|e| match e {
        age::DecryptError::DecryptionFailed | age::DecryptError::NoMatchingKeys => {
            KeyFileError::WrongPassphrase
        }
        other => KeyFileError::Corrupt(other.to_string()),
    })?);
    let parsed: KeyJson =
        serde_json::from_slice(&plain).map_err(|_| KeyFileError::BadContents("not JSON"))?;
    if parsed.version != 1 {
        return Err(KeyFileError::BadContents("unknown version"));
    }
    let master = MasterKey::from_hex(parsed.master_key.as_str())
        .ok_or(KeyFileError::BadContents("master_key is not 64 hex digits"))?;
    let approver = ApproverKey::from_seed_hex(parsed.approver_key.as_str()).ok_or(
        KeyFileError::BadContents("approver_key is not 64 hex digits"),
    )?;
    Ok(KeyMaterial { master, approver })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_unwrap_round_trip_and_wrong_passphrase() {
        let keys = KeyMaterial::generate();
        let pass = Passphrase::from_string("correct horse battery staple".into());
        let file = wrap_key_file(&keys, &pass).unwrap();
        assert!(file.starts_with(b"age-encryption.org/v1\n"));
        let back = unwrap_key_file(&file, &pass).unwrap();
        assert_eq!(back.master.expose(), keys.master.expose());
        assert_eq!(back.approver.public_hex(), keys.approver.public_hex());
        let wrong = Passphrase::from_string("not the passphrase".into());
        assert!(matches!(
            unwrap_key_file(&file, &wrong),
            Err(KeyFileError::WrongPassphrase)
        ));
        assert!(matches!(
            unwrap_key_file(b"garbage", &pass),
            Err(KeyFileError::Corrupt(_))
        ));
    }
}
