//! The key cache: where `vault init`/`unlock` leave the master key so `vault mcp` can open the
//! database without the passphrase. The OS keyring (Secret Service, macOS Keychain, Windows
//! Credential Manager) when one is reachable, else the Linux kernel's keyutils *user* keyring with
//! a timeout. `VAULT_KEYRING=os|kernel|auto` forces a choice. Entries are named by the vault id.
use super::MasterKey;
use std::fmt;
use std::time::Duration;
use zeroize::Zeroizing;

/// How long `vault unlock` leaves the key in the kernel keyring unless told otherwise.
pub const DEFAULT_KERNEL_TTL: Duration = Duration::from_secs(8 * 3600);
const SERVICE: &str = "agent-vault";

/// Where a key was found or put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The platform's keyring store (name of the store).
    Os(&'static str),
    /// Linux kernel keyutils, user keyring, with a timeout.
    Kernel,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::Os(name) => f.write_str(name),
            Backend::Kernel => f.write_str("kernel keyutils user keyring"),
        }
    }
}

/// Errors of the key cache.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("no keyring can hold the key here (OS keyring: {os}; kernel keyring: {kernel}); unlock on a machine with a keyring, or use VAULT_PASSPHRASE_FILE for each command")]
    Unavailable { os: String, kernel: String },
    #[error("VAULT_KEYRING={0:?} is not one of os, kernel, auto")]
    BadChoice(String),
    #[error("the keyring entry for this vault does not hold a 32-byte key; run `vault lock` then `vault unlock`")]
    Malformed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Auto,
    Os,
    Kernel,
}

/// The cache entry of one vault.
#[derive(Debug, Clone)]
pub struct KeyCache {
    vault_id: String,
    mode: Mode,
}

impl KeyCache {
    /// The cache for `vault_id`, honouring `VAULT_KEYRING`.
    pub fn new(vault_id: &str) -> Result<Self, CacheError> {
        let mode = match std::env::var("VAULT_KEYRING").ok().as_deref() {
            None | Some("") | Some("auto") => Mode::Auto,
            Some("os") => Mode::Os,
            Some("kernel") => Mode::Kernel,
            Some(other) => return Err(CacheError::BadChoice(other.to_owned())),
        };
        Ok(Self {
            vault_id: vault_id.to_owned(),
            mode,
        })
    }

    fn kernel_description(&self) -> String {
        format!("{SERVICE}:vault:{}", self.vault_id)
    }

    /// Puts the key in the OS keyring if reachable, else in the kernel keyring for `kernel_ttl`.
    pub fn store(&self, key: &MasterKey, kernel_ttl: Duration) -> Result<Backend, CacheError> {
        let mut os_err = "not tried".to_owned();
        if self.mode != Mode::Kernel {
            match os::store(&self.vault_id, key) {
                Ok(b) => return Ok(b),
                Err(e) => os_err = e,
            }
        }
        let mut kernel_err = "not tried".to_owned();
        if self.mode != Mode::Os {
            match kernel::store(&self.kernel_description(), key, kernel_ttl) {
                Ok(()) => return Ok(Backend::Kernel),
                Err(e) => kernel_err = e,
            }
        }
        Err(CacheError::Unavailable {
            os: os_err,
            kernel: kernel_err,
        })
    }

    /// The cached key, if any backend holds one.
    pub fn load(&self) -> Result<Option<(MasterKey, Backend)>, CacheError> {
        if self.mode != Mode::Os {
            if let Some(bytes) = kernel::load(&self.kernel_description()) {
                let key = MasterKey::from_bytes(&bytes).ok_or(CacheError::Malformed)?;
                return Ok(Some((key, Backend::Kernel)));
            }
        }
        if self.mode != Mode::Kernel {
            if let Some((bytes, backend)) = os::load(&self.vault_id) {
                let key = MasterKey::from_bytes(&bytes).ok_or(CacheError::Malformed)?;
                return Ok(Some((key, backend)));
            }
        }
        Ok(None)
    }

    /// Removes the key from every backend that holds it; returns where it was.
    pub fn remove(&self) -> Vec<Backend> {
        let mut removed = Vec::new();
        if kernel::remove(&self.kernel_description()) {
            removed.push(Backend::Kernel);
        }
        if let Some(b) = os::remove(&self.vault_id) {
            removed.push(b);
        }
        removed
    }

    /// Which backends are reachable here, for `vault doctor`.
    pub fn probe() -> Vec<(String, Result<(), String>)> {
        vec![
            (os::NAME.to_owned(), os::probe()),
            (Backend::Kernel.to_string(), kernel::probe()),
        ]
    }
}

#[cfg(target_os = "linux")]
mod kernel {
    use super::MasterKey;
    use linux_keyutils::{KeyPermissionsBuilder, KeyRing, KeyRingIdentifier, Permission};
    use std::time::Duration;
    use zeroize::Zeroizing;

    fn user_ring() -> Result<KeyRing, String> {
        KeyRing::from_special_id(KeyRingIdentifier::User, true).map_err(|e| format!("{e:?}"))
    }

    pub fn store(desc: &str, key: &MasterKey, ttl: Duration) -> Result<(), String> {
        let ring = user_ring()?;
        let k = ring
            .add_key(desc, key.expose())
            .map_err(|e| format!("{e:?}"))?;
        // Readable by this user's other processes (vault mcp), nobody else.
        let perms = KeyPermissionsBuilder::builder()
            .posessor(Permission::ALL)
            .user(Permission::ALL)
            .build();
        let secured = k
            .set_perms(perms)
            .and_then(|()| k.set_timeout(ttl.as_secs().max(1) as usize));
        if let Err(e) = secured {
            let _ = k.invalidate();
            return Err(format!("{e:?}"));
        }
        Ok(())
    }

    pub fn load(desc: &str) -> Option<Zeroizing<Vec<u8>>> {
        let ring = user_ring().ok()?;
        let k = ring.search(desc).ok()?;
        k.read_to_vec().ok().map(Zeroizing::new)
    }

    pub fn remove(desc: &str) -> bool {
        let Ok(ring) = user_ring() else { return false };
        let mut any = false;
        while let Ok(k) = ring.search(desc) {
            if k.invalidate().is_err() && ring.unlink_key(k).is_err() {
                break;
            }
            any = true;
        }
        any
    }

    pub fn probe() -> Result<(), String> {
        user_ring().map(|_| ())
    }
}

#[cfg(not(target_os = "linux"))]
mod kernel {
    use super::MasterKey;
    use std::time::Duration;
    use zeroize::Zeroizing;
    pub fn store(_: &str, _: &MasterKey, _: Duration) -> Result<(), String> {
        Err("only on Linux".into())
    }
    pub fn load(_: &str) -> Option<Zeroizing<Vec<u8>>> {
        None
    }
    pub fn remove(_: &str) -> bool {
        false
    }
    pub fn probe() -> Result<(), String> {
        Err("only on Linux".into())
    }
}

mod os {
    use super::{Backend, MasterKey, Zeroizing, SERVICE};
    use keyring_core::{CredentialStore, Entry};
    use std::sync::Arc;

    #[cfg(target_os = "linux")]
    pub const NAME: &str = "Secret Service";
    #[cfg(target_os = "macos")]
    pub const NAME: &str = "macOS Keychain";
    #[cfg(windows)]
    pub const NAME: &str = "Windows Credential Manager";
    #[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
    pub const NAME: &str = "OS keyring";

    fn open_store() -> Result<Arc<CredentialStore>, String> {
        #[cfg(target_os = "linux")]
        {
            // Without a session bus there is no Secret Service; do not let D-Bus try to start one.
            let runtime_bus = std::env::var_os("XDG_RUNTIME_DIR")
                .map(|d| std::path::Path::new(&d).join("bus").exists())
                .unwrap_or(false);
            if std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_none() && !runtime_bus {
                return Err("no D-Bus session bus".into());
            }
            let s = zbus_secret_service_keyring_store::Store::new().map_err(|e| e.to_string())?;
            Ok(s as Arc<CredentialStore>)
        }
        #[cfg(target_os = "macos")]
        {
            let s =
                apple_native_keyring_store::keychain::Store::new().map_err(|e| e.to_string())?;
            Ok(s as Arc<CredentialStore>)
        }
        #[cfg(windows)]
        {
            let s = windows_native_keyring_store::Store::new().map_err(|e| e.to_string())?;
            Ok(s as Arc<CredentialStore>)
        }
        #[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
        {
            Err("no OS keyring on this platform".into())
        }
    }

    fn entry(vault_id: &str) -> Result<Entry, String> {
        let store = open_store()?;
        Entry::new_in_store(&store, SERVICE, vault_id).map_err(|e| e.to_string())
    }

    pub fn store(vault_id: &str, key: &MasterKey) -> Result<Backend, String> {
        let e = entry(vault_id)?;
        e.set_secret(key.expose()).map_err(|e| e.to_string())?;
        Ok(Backend::Os(NAME))
    }

    pub fn load(vault_id: &str) -> Option<(Zeroizing<Vec<u8>>, Backend)> {
        let e = entry(vault_id).ok()?;
        let bytes = e.get_secret().ok()?;
        Some((Zeroizing::new(bytes), Backend::Os(NAME)))
    }

    pub fn remove(vault_id: &str) -> Option<Backend> {
        let e = entry(vault_id).ok()?;
        e.delete_credential().ok().map(|()| Backend::Os(NAME))
    }

    pub fn probe() -> Result<(), String> {
        open_store().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_load_remove_in_a_real_keyring() {
        let id = crate::credentials::new_id("vlt_test");
        let cache = KeyCache::new(&id).unwrap();
        assert!(cache.load().unwrap().is_none());
        let key = MasterKey::generate();
        let backend = cache.store(&key, Duration::from_secs(60)).unwrap();
        let (back, from) = cache.load().unwrap().expect("the key is cached");
        assert_eq!(back.expose(), key.expose());
        assert_eq!(from, backend);
        // Another vault's entry is separate.
        let other = KeyCache::new(&crate::credentials::new_id("vlt_test")).unwrap();
        assert!(other.load().unwrap().is_none());
        assert_eq!(cache.remove(), vec![backend]);
        assert!(cache.load().unwrap().is_none());
        assert!(cache.remove().is_empty());
    }
}
