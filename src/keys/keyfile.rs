//! `vault.key.age`: the master key and approver seed as documented JSON, encrypted with age to the
//! person's passphrase (scrypt), so the stock `age` CLI can always recover them.
use super::{ApproverKey, KeyMaterial, MasterKey, Passphrase};
use serde::Deserialize;
use zeroize::Zeroizing;

/// Errors wrapping or unwrapping the key file.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("wrong passphrase for vault.key.age (nothing was changed); type it again, minding the keyboard layout and caps lock. A forgotten passphrase cannot be recovered: the vault's key is encrypted with it")]
    WrongPassphrase,
    #[error("vault.key.age is not a valid age file ({0}); restore it from your backup")]
    Corrupt(String),
    #[error("vault.key.age asks for scrypt work 2^{required}, more than this vault accepts (2^{MAX_WORK_FACTOR}: {} MiB of memory); re-encrypt it with `age -p` at a lower work factor, or restore it from your backup", 128u64 * 8 * (1 << MAX_WORK_FACTOR) / (1 << 20))]
    ExcessiveWork { required: u8 },
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

/// Encrypts the key material to the passphrase with age's scrypt recipient (default work factor:
/// about a second of this machine's CPU).
pub fn wrap_key_file(keys: &KeyMaterial, passphrase: &Passphrase) -> Result<Vec<u8>, KeyFileError> {
    let mut recipient = age::scrypt::Recipient::new(passphrase.secret().clone());
    if let Some(log_n) = test_work_factor() {
        recipient.set_work_factor(log_n);
    }
    let text = plaintext(keys);
    age::encrypt(&recipient, text.as_bytes()).map_err(|e| KeyFileError::Encrypt(e.to_string()))
}

/// Debug builds only, never the shipped one: `VAULT_TEST_KDF_LOG_N` (1-22) sets the scrypt work
/// factor of a key file written now. The test suite makes hundreds of vaults, and each unlock of
/// each one spent a second of CPU in scrypt (the suite ran in 743 s; at 2^10, 138 s). `.ci/run`
/// checks that the release build ignores it.
#[cfg(debug_assertions)]
fn test_work_factor() -> Option<u8> {
    let n: u8 = std::env::var("VAULT_TEST_KDF_LOG_N").ok()?.parse().ok()?;
    (1..=MAX_WORK_FACTOR).contains(&n).then_some(n)
}

/// The shipped build: age's measured work factor, whatever the environment says.
#[cfg(not(debug_assertions))]
fn test_work_factor() -> Option<u8> {
    None
}

/// The highest scrypt work factor accepted: 2^22 takes 4 GiB of memory. age's own bound is this
/// machine's speed measured now plus 4 (about 16 s), which a busy machine measures low: a key
/// file written at an idle moment (age's 1 s target, 2^19 here) was then refused as "excessive
/// work" with the vault unharmed.
const MAX_WORK_FACTOR: u8 = 22;

/// The work factor the key file's scrypt stanza names (`-> scrypt SALT LOG_N`), if it has one.
fn stanza_work_factor(bytes: &[u8]) -> Option<u8> {
    let header = bytes.split(|&b| b == b'\n').nth(1)?;
    let text = std::str::from_utf8(header).ok()?;
    let mut words = text.strip_prefix("-> scrypt ")?.split(' ');
    words.next()?;
    words.next()?.parse().ok()
}

/// Decrypts and parses the key file.
pub fn unwrap_key_file(bytes: &[u8], passphrase: &Passphrase) -> Result<KeyMaterial, KeyFileError> {
    let mut identity = age::scrypt::Identity::new(passphrase.secret().clone());
    // The file's own work factor is accepted up to the fixed bound, however busy the machine is
    // now; beyond it, age's bound applies.
    if let Some(log_n) = stanza_work_factor(bytes).filter(|&n| n <= MAX_WORK_FACTOR) {
        debug_assert!(log_n <= MAX_WORK_FACTOR);
        identity.set_max_work_factor(MAX_WORK_FACTOR);
    }
    let plain = Zeroizing::new(age::decrypt(&identity, bytes).map_err(|e| match e {
        age::DecryptError::DecryptionFailed | age::DecryptError::NoMatchingKeys => {
            KeyFileError::WrongPassphrase
        }
        age::DecryptError::ExcessiveWork { required, .. } => {
            KeyFileError::ExcessiveWork { required }
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
    fn the_files_own_work_factor_is_read_and_bounded() {
        let keys = KeyMaterial::generate();
        let pass = Passphrase::from_string("correct horse battery staple".into());
        let file = wrap_key_file(&keys, &pass).unwrap();
        let n = stanza_work_factor(&file).expect("an scrypt stanza");
        assert!((10..=MAX_WORK_FACTOR).contains(&n), "{n}");
        // The same file naming 2^40: age refuses before any work, and the message says why.
        let line_end = 22 + file[22..].iter().position(|&b| b == b'\n').unwrap();
        let stanza = std::str::from_utf8(&file[22..line_end]).unwrap();
        // The work factor is the stanza's last field (the salt before it may start with digits).
        let (head, last) = stanza.rsplit_once(' ').unwrap();
        assert_eq!(last, n.to_string());
        let forged_stanza = format!("{head} 40");
        let forged = [&file[..22], forged_stanza.as_bytes(), &file[line_end..]].concat();
        assert_eq!(stanza_work_factor(&forged), Some(40));
        let e = unwrap_key_file(&forged, &pass).unwrap_err();
        assert!(
            matches!(e, KeyFileError::ExcessiveWork { required: 40 }),
            "{e:?}"
        );
        assert_eq!(
            stanza_work_factor(b"age-encryption.org/v1\n-> X25519 abc\n"),
            None
        );
    }

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
