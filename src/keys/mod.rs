//! Key material: the master key that opens `vault.db`, the approver's ed25519 key, the age file
//! that keeps both behind the passphrase, the opt-in OS keyring (`--remember`), and passphrase
//! input.
//!
//! Nothing here prints; every key type zeroizes on drop and shows `<redacted>` in `Debug`.
mod keyfile;
mod passphrase;
pub mod public;
pub mod remember;
pub mod signing;

pub use keyfile::{unwrap_key_file, wrap_key_file, KeyFileError};
pub use passphrase::{
    file_exposure, read_file_line, read_stdin_line, read_terminal, FileExposure, Passphrase,
    PassphraseError, PassphraseSource, PASSPHRASE_INSTEAD,
};
pub use remember::CacheError;

use std::fmt;
use zeroize::Zeroizing;

/// The 32-byte random key SQLCipher opens the database with (raw key, no KDF). The bytes live on
/// the heap, so moving the key never leaves a copy behind, and their page can be locked in RAM.
#[derive(Clone)]
pub struct MasterKey(Box<Zeroizing<[u8; 32]>>);

impl MasterKey {
    /// A fresh key from the OS random number generator.
    pub fn generate() -> Self {
        let mut bytes = Box::new(Zeroizing::new([0u8; 32]));
        getrandom::fill(bytes.as_mut().as_mut()).expect("the OS random number generator failed");
        Self(bytes)
    }

    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != 32 {
            return None;
        }
        let mut key = Box::new(Zeroizing::new([0u8; 32]));
        key.copy_from_slice(bytes);
        Some(Self(key))
    }

    pub fn from_hex(hex_str: &str) -> Option<Self> {
        let mut bytes = Box::new(Zeroizing::new([0u8; 32]));
        hex::decode_to_slice(hex_str.trim(), bytes.as_mut().as_mut()).ok()?;
        Some(Self(bytes))
    }

    pub fn expose(&self) -> &[u8; 32] {
        &self.0
    }

    /// Lowercase hex, in a buffer that is wiped when dropped.
    pub fn to_hex(&self) -> Zeroizing<String> {
        Zeroizing::new(hex::encode(&self.0[..]))
    }
}

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MasterKey(<redacted>)")
    }
}

/// The approver's ed25519 signing key. Only `vault approve`, `vault resume` and a person's
/// `add`/`edit` ever hold it; the agent trusts its public half, handed over at unlock.
pub struct ApproverKey(ed25519_dalek::SigningKey);

impl ApproverKey {
    pub fn generate() -> Self {
        let mut seed = Zeroizing::new([0u8; 32]);
        getrandom::fill(seed.as_mut()).expect("the OS random number generator failed");
        Self(ed25519_dalek::SigningKey::from_bytes(&seed))
    }

    pub fn from_seed_hex(hex_str: &str) -> Option<Self> {
        let mut seed = Zeroizing::new([0u8; 32]);
        hex::decode_to_slice(hex_str.trim(), seed.as_mut()).ok()?;
        Some(Self(ed25519_dalek::SigningKey::from_bytes(&seed)))
    }

    pub fn seed_hex(&self) -> Zeroizing<String> {
        Zeroizing::new(hex::encode(self.0.as_bytes()))
    }

    pub fn public(&self) -> ed25519_dalek::VerifyingKey {
        self.0.verifying_key()
    }

    pub fn public_hex(&self) -> String {
        hex::encode(self.public().as_bytes())
    }

    pub fn signing_key(&self) -> &ed25519_dalek::SigningKey {
        &self.0
    }
}

impl fmt::Debug for ApproverKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApproverKey(public={}, <redacted>)", self.public_hex())
    }
}

/// Everything `vault.key.age` holds.
#[derive(Debug)]
pub struct KeyMaterial {
    pub master: MasterKey,
    pub approver: ApproverKey,
}

impl KeyMaterial {
    /// Keeps only the approver key; the master key is wiped as it is dropped.
    pub fn into_approver(self) -> ApproverKey {
        let KeyMaterial { master, approver } = self;
        drop(master);
        approver
    }

    pub fn generate() -> Self {
        Self {
            master: MasterKey::generate(),
            approver: ApproverKey::generate(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_key_bytes() {
        let m = KeyMaterial::generate();
        let dbg = format!("{m:?}");
        assert!(dbg.contains("<redacted>"));
        assert!(!dbg.contains(m.master.to_hex().as_str()));
        assert!(!dbg.contains(m.approver.seed_hex().as_str()));
    }

    #[test]
    fn hex_round_trip() {
        let m = MasterKey::generate();
        let back = MasterKey::from_hex(&m.to_hex()).unwrap();
        assert_eq!(m.expose(), back.expose());
        assert!(MasterKey::from_hex("abcd").is_none());
        let a = ApproverKey::generate();
        let b = ApproverKey::from_seed_hex(&a.seed_hex()).unwrap();
        assert_eq!(a.public_hex(), b.public_hex());
    }
}
