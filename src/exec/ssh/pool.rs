//! SSH connections: connect only to a server whose host key matches the credential's pinned
//! `SHA256:` fingerprint (no trust on first use), authenticate with the credential's key or
//! password, and share one authenticated connection per credential version across calls. Idle
//! connections are closed; a dropped one is replaced once, with the pin checked again.
use crate::credentials::SshAuth;
use russh::client::{self, Handle, Msg};
use russh::keys::{HashAlg, PrivateKeyWithHashAlg, PublicKeyOrCertificate};
use russh::Channel;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zeroize::Zeroizing;

/// Sessions open at once on one connection (OpenSSH's `MaxSessions` defaults to 10).
const MAX_CHANNELS_PER_CONNECTION: usize = 8;

/// Why no session could be opened. Every variant means the command was not sent.
#[derive(Debug, thiserror::Error)]
pub(super) enum ConnectError {
    #[error("cannot connect to {addr}: {reason}; check that the host is up and the port is right")]
    Connect { addr: String, reason: String },
    #[error("the host key of {addr} is {seen}, but the credential pins {pinned}; refused, and nothing was sent. If the server's key really changed, compare it on the server (`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`) and pin it with `vault edit {credential} --host-key SHA256:…`")]
    HostKey {
        addr: String,
        seen: String,
        pinned: String,
        credential: String,
    },
    #[error("{addr} refused the credential's {method} for user {user}; check the user and that the server accepts this {method} (authorized_keys, PasswordAuthentication)")]
    Auth {
        addr: String,
        user: String,
        method: &'static str,
    },
    #[error("the credential's private key cannot be used ({0}); add it again with `vault add ssh … --key-file`")]
    Key(String),
    #[error("{addr} would not open a session: {reason}")]
    Channel { addr: String, reason: String },
    #[error("the command could not be sent to {addr} ({reason}); nothing ran")]
    NotSent { addr: String, reason: String },
}

/// What a connection needs; borrowed from the authorized action for the duration of a connect.
pub(super) struct Login<'a> {
    pub credential: &'a str,
    pub host: &'a str,
    pub port: u16,
    pub user: &'a str,
    pub pin: &'a str,
    pub auth: &'a SshAuth,
    pub secret: &'a [u8],
    pub connect_timeout: Duration,
}

impl Login<'_> {
    pub(super) fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Checks the server's host key against the pin and remembers what it saw.
pub(super) struct Client {
    pin: String,
    seen: Arc<Mutex<Option<String>>>,
}

impl client::Handler for Client {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let fp = match key {
            PublicKeyOrCertificate::PublicKey { key, .. } => key.fingerprint(HashAlg::Sha256),
            PublicKeyOrCertificate::Certificate(c) => c.public_key().fingerprint(HashAlg::Sha256),
        }
        .to_string();
        let ok = fp == self.pin;
        if let Ok(mut slot) = self.seen.lock() {
            *slot = Some(fp);
        }
        Ok(ok)
    }
}

/// One authenticated connection.
pub(super) struct Conn {
    handle: Handle<Client>,
    active: AtomicUsize,
    last_used: Mutex<Instant>,
}

/// A connection in use by one call; gives its slot back on drop.
pub(super) struct Lease {
    conn: Arc<Conn>,
    /// The connection was already open (no handshake, no authentication for this call).
    pub reused: bool,
}

impl Lease {
    fn new(conn: Arc<Conn>, reused: bool) -> Self {
        conn.active.fetch_add(1, Ordering::AcqRel);
        Self { conn, reused }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Ok(mut t) = self.conn.last_used.lock() {
            *t = Instant::now();
        }
        self.conn.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Connections keyed by credential id and version (an edit changes the version, so a changed
/// credential never reuses a connection made with the old one).
pub(super) type Key = (String, i64);

type Slot = Arc<tokio::sync::Mutex<Vec<Arc<Conn>>>>;

/// The shared connections of the process.
pub(super) struct Pool {
    slots: Mutex<HashMap<Key, Slot>>,
    config: Arc<client::Config>,
    /// Connections made (handshake + authentication) since start; for tests and benchmarks.
    pub connects: AtomicUsize,
}

impl Pool {
    pub(super) fn new() -> Self {
        let config = client::Config {
            // A dead peer is noticed between calls; `close_idle` does the idle policy.
            keepalive_interval: Some(Duration::from_secs(15)),
            keepalive_max: 3,
            inactivity_timeout: None,
            // At most 16 packets (512 KiB) wait per channel: backpressure, not memory. The window
            // bounds what is in flight when a flood is stopped (it is all drained and counted):
            // 512 KiB still allows ~10 MB/s at 50 ms round trips.
            channel_buffer_size: 16,
            window_size: 512 * 1024,
            nodelay: true,
            ..client::Config::default()
        };
        Self {
            slots: Mutex::new(HashMap::new()),
            config: Arc::new(config),
            connects: AtomicUsize::new(0),
        }
    }

    fn slot(&self, key: &Key) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.entry(key.clone()).or_default().clone()
    }

    /// A session channel with `command`'s exec request sent: on a shared connection when one is
    /// open with room, else on a new one. A shared connection that turns out dead (the channel
    /// will not open, or the exec request cannot be handed to it, so nothing ran) is dropped and
    /// replaced once. The slot is locked only to pick or make a connection (so calls that arrive
    /// together share one login), never while a channel opens.
    pub(super) async fn started(
        &self,
        key: &Key,
        login: &Login<'_>,
        command: &str,
    ) -> Result<(Channel<Msg>, Lease), ConnectError> {
        let slot = self.slot(key);
        // A login by an OpenBao certificate is made for this action (its certificate is the one
        // the journal names): its own connection, never shared, closed when the call ends.
        let own = matches!(login.auth, SshAuth::OpenbaoCert { .. });
        let mut reuse = !own;
        loop {
            let lease = {
                let mut conns = slot.lock().await;
                conns.retain(|c| !c.handle.is_closed());
                let room = conns
                    .iter()
                    .find(|c| c.active.load(Ordering::Acquire) < MAX_CHANNELS_PER_CONNECTION);
                match room {
                    Some(c) if reuse => Lease::new(c.clone(), true),
                    _ => {
                        let conn = Arc::new(self.connect(login).await?);
                        if !own {
                            conns.push(conn.clone());
                        }
                        Lease::new(conn, false)
                    }
                }
            };
            let open_timeout = login.connect_timeout;
            let opened =
                tokio::time::timeout(open_timeout, lease.conn.handle.channel_open_session()).await;
            let failure = match opened {
                // Nothing is queued for a new channel, so this cannot block the connection. It
                // fails only when the connection's task is gone: the request never left.
                Ok(Ok(ch)) => match ch.exec(true, command.as_bytes()).await {
                    Ok(()) => return Ok((ch, lease)),
                    Err(e) => ConnectError::NotSent {
                        addr: login.addr(),
                        reason: e.to_string(),
                    },
                },
                Ok(Err(e)) => ConnectError::Channel {
                    addr: login.addr(),
                    reason: e.to_string(),
                },
                Err(_) => ConnectError::Channel {
                    addr: login.addr(),
                    reason: format!("no answer within {}s", open_timeout.as_secs()),
                },
            };
            if !lease.reused {
                return Err(failure);
            }
            tracing::info!(addr = %login.addr(), "a shared SSH connection failed ({failure}); reconnecting");
            slot.lock().await.retain(|c| !Arc::ptr_eq(c, &lease.conn));
            reuse = false;
        }
    }

    async fn connect(&self, login: &Login<'_>) -> Result<Conn, ConnectError> {
        let seen = Arc::new(Mutex::new(None));
        let client = Client {
            pin: login.pin.to_owned(),
            seen: seen.clone(),
        };
        let addr = login.addr();
        let refused = |seen: &Arc<Mutex<Option<String>>>| {
            let fp = seen.lock().ok().and_then(|s| s.clone())?;
            (fp != login.pin).then(|| ConnectError::HostKey {
                addr: addr.clone(),
                seen: fp,
                pinned: login.pin.to_owned(),
                credential: login.credential.to_owned(),
            })
        };
        let deadline = tokio::time::Instant::now() + login.connect_timeout;
        let connecting = client::connect(
            self.config.clone(),
            (login.host.to_owned(), login.port),
            client,
        );
        let mut handle = match tokio::time::timeout_at(deadline, connecting).await {
            Ok(Ok(h)) => h,
            Ok(Err(e)) => {
                return Err(refused(&seen).unwrap_or(ConnectError::Connect {
                    addr,
                    reason: e.to_string(),
                }))
            }
            Err(_) => {
                return Err(ConnectError::Connect {
                    addr,
                    reason: format!("no answer within {}s", login.connect_timeout.as_secs()),
                })
            }
        };
        let authed = tokio::time::timeout_at(deadline, authenticate(&mut handle, login)).await;
        // The host key is checked during the key exchange, before any credential is sent; a
        // mismatch ends the connection there and surfaces here as a failed authentication.
        if let Some(e) = refused(&seen) {
            return Err(e);
        }
        auth_outcome(authed, login, addr)?;
        self.connects.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(addr = %login.addr(), "SSH connection authenticated");
        Ok(Conn {
            handle,
            active: AtomicUsize::new(0),
            last_used: Mutex::new(Instant::now()),
        })
    }

    /// Closes connections unused for `idle` (and forgets dead ones); returns how many it closed.
    pub(super) async fn close_idle(&self, idle: Duration) -> usize {
        let slots: Vec<(Key, Slot)> = {
            let s = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            s.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        let mut closed = 0;
        for (key, slot) in slots {
            let mut conns = slot.lock().await;
            let mut keep = Vec::new();
            for c in conns.drain(..) {
                let unused = c.active.load(Ordering::Acquire) == 0
                    && c.last_used
                        .lock()
                        .map(|t| t.elapsed() >= idle)
                        .unwrap_or(true);
                if c.handle.is_closed() {
                    continue;
                }
                if unused {
                    let _ = c
                        .handle
                        .disconnect(russh::Disconnect::ByApplication, "idle", "en")
                        .await;
                    closed += 1;
                } else {
                    keep.push(c);
                }
            }
            *conns = keep;
            if conns.is_empty() {
                let mut s = self.slots.lock().unwrap_or_else(|p| p.into_inner());
                if s.get(&key).is_some_and(|v| Arc::ptr_eq(v, &slot)) {
                    s.remove(&key);
                }
            }
        }
        closed
    }
}

/// Where an OpenSSH private key's PEM ends (a certificate line may follow it).
pub(crate) const PEM_END: &str = "-----END OPENSSH PRIVATE KEY-----";

enum AuthError {
    Key(String),
    Ssh(russh::Error),
}

/// Authenticates; the parsed private key lives only for this call (ssh-key zeroizes it on drop,
/// russh drops its copy once the server answered), the PEM text in a zeroizing buffer.
async fn authenticate(handle: &mut Handle<Client>, login: &Login<'_>) -> Result<bool, AuthError> {
    match login.auth {
        SshAuth::Password => {
            let password = Zeroizing::new(String::from_utf8_lossy(login.secret).into_owned());
            // russh zeroizes its copy of the password when it drops it.
            handle
                .authenticate_password(login.user, password.as_str())
                .await
                .map(|r| r.success())
                .map_err(AuthError::Ssh)
        }
        SshAuth::OpenbaoCert { .. } => {
            // The ephemeral key (OpenSSH PEM) and the CA's certificate for it, one after the
            // other (`openbao_cert_secret`), made for this dispatch.
            let text = std::str::from_utf8(login.secret)
                .map_err(|_| AuthError::Key("the ephemeral key is not text".into()))?;
            let end = text
                .find(PEM_END)
                .map(|i| i + PEM_END.len())
                .ok_or_else(|| {
                    AuthError::Key("no ephemeral key came with the certificate".into())
                })?;
            let pem = Zeroizing::new(text[..end].to_owned());
            let key = russh::keys::decode_secret_key(&pem, None)
                .map_err(|e| AuthError::Key(e.to_string()))?;
            let cert = russh::keys::Certificate::from_openssh(text[end..].trim()).map_err(|e| {
                AuthError::Key(format!(
                    "the certificate OpenBao signed cannot be read: {e}"
                ))
            })?;
            handle
                .authenticate_openssh_cert(login.user, Arc::new(key), cert)
                .await
                .map(|r| r.success())
                .map_err(AuthError::Ssh)
        }
        SshAuth::Key { .. } => {
            let pem = Zeroizing::new(
                std::str::from_utf8(login.secret)
                    .map_err(|_| AuthError::Key("the stored key is not text".into()))?
                    .to_owned(),
            );
            let key = russh::keys::decode_secret_key(&pem, None)
                .map_err(|e| AuthError::Key(e.to_string()))?;
            let rsa = key.algorithm().is_rsa();
            let key = Arc::new(key);
            let mut hashes = vec![None];
            if rsa {
                // rsa-sha2-512 or -256 as the server announces (RFC 8332); SHA-256 if it is
                // silent. OpenSSH announces both even when PubkeyAcceptedAlgorithms accepts one,
                // so the other is tried next.
                let announced = match handle.best_supported_rsa_hash().await {
                    Ok(Some(alg)) => alg,
                    _ => Some(HashAlg::Sha256),
                };
                hashes = vec![announced];
                for alt in [Some(HashAlg::Sha512), Some(HashAlg::Sha256)] {
                    if !hashes.contains(&alt) {
                        hashes.push(alt);
                    }
                }
            }
            let mut last = Ok(false);
            for hash in hashes {
                last = handle
                    .authenticate_publickey(
                        login.user,
                        PrivateKeyWithHashAlg::new(key.clone(), hash),
                    )
                    .await
                    .map(|r| r.success());
                if !matches!(last, Ok(false)) {
                    break;
                }
            }
            last.map_err(AuthError::Ssh)
        }
    }
}

/// What an authentication attempt that ended (or timed out) means for the connection.
fn auth_outcome(
    authed: Result<Result<bool, AuthError>, tokio::time::error::Elapsed>,
    login: &Login<'_>,
    addr: String,
) -> Result<(), ConnectError> {
    let method = match login.auth {
        SshAuth::Key { .. } => "private key",
        SshAuth::Password => "password",
        SshAuth::OpenbaoCert { .. } => "OpenBao certificate",
    };
    match authed {
        Ok(Ok(true)) => Ok(()),
        Ok(Ok(false)) => Err(ConnectError::Auth {
            addr,
            user: login.user.to_owned(),
            method,
        }),
        Ok(Err(AuthError::Key(e))) => Err(ConnectError::Key(e)),
        Ok(Err(AuthError::Ssh(e))) => Err(ConnectError::Connect {
            addr,
            reason: e.to_string(),
        }),
        Err(_) => Err(ConnectError::Connect {
            addr,
            reason: format!(
                "no answer to authentication within {}s",
                login.connect_timeout.as_secs()
            ),
        }),
    }
}
