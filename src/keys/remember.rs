//! The opt-in OS keyring (`vault unlock --remember`): the master key and the approver's public
//! key in the Secret Service, macOS Keychain or Windows Credential Manager, so a login unit can
//! start the agent without a prompt. Any same-user process that can reach that keyring item can
//! read it: that is the trade `vault doctor` states. Built only with the `remember` feature (the
//! Secret Service store brings D-Bus and an async runtime of its own); without it, `--remember`
//! says how to get it.
use super::MasterKey;
use zeroize::Zeroizing;

#[cfg(feature = "remember")]
const SERVICE: &str = "agent-vault";

/// Errors of the OS keyring.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("the OS keyring is not reachable here ({0}); `--remember` needs a Secret Service, Keychain or Credential Manager")]
    Unavailable(String),
    #[error("the OS keyring entry for this vault is malformed; run `vault lock --forget`, then `vault unlock --remember`")]
    Malformed,
}

/// What `--remember` keeps: enough for an agent to start and trust the right approver.
pub struct Remembered {
    pub master: MasterKey,
    pub approver: ed25519_dalek::VerifyingKey,
}

impl std::fmt::Debug for Remembered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Remembered(<redacted>)")
    }
}

/// The name of this platform's keyring.
pub fn keyring_name() -> &'static str {
    os::NAME
}

/// Stores the master key and the approver public key for `vault_id` in the OS keyring.
pub fn remember(
    vault_id: &str,
    master: &MasterKey,
    approver: &ed25519_dalek::VerifyingKey,
) -> Result<(), CacheError> {
    let mut value = Zeroizing::new(Vec::with_capacity(64));
    value.extend_from_slice(master.expose());
    value.extend_from_slice(approver.as_bytes());
    os::store(vault_id, &value).map_err(CacheError::Unavailable)
}

/// What `--remember` stored for `vault_id`, if anything.
pub fn recall(vault_id: &str) -> Result<Option<Remembered>, CacheError> {
    let Some(bytes) = os::load(vault_id) else {
        return Ok(None);
    };
    if bytes.len() != 64 {
        return Err(CacheError::Malformed);
    }
    let master = MasterKey::from_bytes(&bytes[..32]).ok_or(CacheError::Malformed)?;
    let public: [u8; 32] = bytes[32..].try_into().map_err(|_| CacheError::Malformed)?;
    let approver =
        ed25519_dalek::VerifyingKey::from_bytes(&public).map_err(|_| CacheError::Malformed)?;
    Ok(Some(Remembered { master, approver }))
}

/// Removes the remembered key (`vault lock --forget`); returns whether there was one.
pub fn forget(vault_id: &str) -> bool {
    os::remove(vault_id)
}

/// Whether the OS keyring is reachable, for `vault doctor`.
pub fn probe() -> Result<(), String> {
    os::probe()
}

#[cfg(feature = "remember")]
mod os {
    use super::{Zeroizing, SERVICE};
    use keyring_core::{CredentialStore, Entry};
    use std::sync::Arc;

    #[cfg(target_os = "linux")]
    pub(super) const NAME: &str = "Secret Service";
    #[cfg(target_os = "macos")]
    pub const NAME: &str = "macOS Keychain";
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
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
        #[cfg(not(any(target_os = "linux", target_os = "macos")))]
        {
            Err("no OS keyring on this platform".into())
        }
    }

    fn entry(vault_id: &str) -> Result<Entry, String> {
        let store = open_store()?;
        Entry::new_in_store(&store, SERVICE, vault_id).map_err(|e| e.to_string())
    }

    pub(super) fn store(vault_id: &str, value: &[u8]) -> Result<(), String> {
        let e = entry(vault_id)?;
        e.set_secret(value).map_err(|e| e.to_string())
    }

    pub(super) fn load(vault_id: &str) -> Option<Zeroizing<Vec<u8>>> {
        let e = entry(vault_id).ok()?;
        e.get_secret().ok().map(Zeroizing::new)
    }

    pub(super) fn remove(vault_id: &str) -> bool {
        entry(vault_id)
            .ok()
            .is_some_and(|e| e.delete_credential().is_ok())
    }

    pub(super) fn probe() -> Result<(), String> {
        open_store().map(|_| ())
    }
}

/// Without the `remember` feature: no OS keyring, and every use says how to get one.
#[cfg(not(feature = "remember"))]
mod os {
    use super::Zeroizing;

    pub(super) const NAME: &str = "OS keyring";
    const MISSING: &str = "this `vault` was built without the OS keyring; install it with `cargo install --locked --path . --features remember` to use --remember";

    pub(super) fn store(_: &str, _: &[u8]) -> Result<(), String> {
        Err(MISSING.into())
    }

    pub(super) fn load(_: &str) -> Option<Zeroizing<Vec<u8>>> {
        None
    }

    pub(super) fn remove(_: &str) -> bool {
        false
    }

    pub(super) fn probe() -> Result<(), String> {
        Err(MISSING.into())
    }
}
