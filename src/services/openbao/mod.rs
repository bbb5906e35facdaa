//! Team mode inside the custody agent: the vault's OpenBao session (the stored login, the token
//! it yields, renewed before it expires and replaced by a fresh AppRole login when it is refused)
//! and the secrets read through it. A secret read from OpenBao lives only in this process's
//! memory, and only for `[openbao] secret_cache_seconds`; it is never written to disk. Calls are
//! blocking (ureq) and serialized by one lock, so concurrent calls for one secret make one
//! request, and a fault makes one failed request per call, never a retry storm.
pub(crate) mod head;
pub(crate) mod login;

use crate::approvals::FromOpenBao;
use crate::config::OpenBao as Settings;
use crate::openbao::{self, Client, Refusal, Token};
use crate::store::StoreError;
use crate::wire::{OpenBaoAuth, OpenBaoLogin, OpenBaoRef, Secret};
use login::Stored;
use secrecy::{ExposeSecret, SecretString};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Why a secret could not be had from OpenBao. Never holds a secret.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RemoteError {
    #[error("the vault is not logged in to OpenBao, and credential secrets come from it; the person logs in with `vault openbao login --address URL …`")]
    NotLoggedIn,
    #[error("{0}")]
    Bao(#[from] openbao::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the SSH key or certificate for OpenBao could not be made or read: {0}")]
    Key(String),
}

impl RemoteError {
    /// A short word for the journal and the model: what kind of fault it was.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            RemoteError::NotLoggedIn => "openbao_not_logged_in",
            RemoteError::Bao(e) => match e {
                openbao::Error::Unreachable { .. } | openbao::Error::Tls { .. } => {
                    "openbao_unreachable"
                }
                openbao::Error::Sealed { .. } => "openbao_sealed",
                openbao::Error::Forbidden { .. } => "openbao_forbidden",
                openbao::Error::NotFound { .. } | openbao::Error::MissingField { .. } => {
                    "openbao_missing"
                }
                _ => "openbao_error",
            },
            RemoteError::Store(_) | RemoteError::Key(_) => "openbao_error",
        }
    }
}

/// How long a certificate for one action's connection is valid.
const CERT_TTL: Duration = Duration::from_secs(120);

/// What a dispatch got from OpenBao.
pub(crate) struct Fetched {
    pub(crate) secret: Secret,
    pub(crate) cert: Option<CertInfo>,
}

/// What the journal records of a certificate.
pub(crate) struct CertInfo {
    pub(crate) serial: String,
    pub(crate) role: String,
    pub(crate) principal: String,
    pub(crate) valid_after: u64,
    pub(crate) valid_before: u64,
}

struct Cached {
    version: u64,
    value: Secret,
    read_at: Instant,
}

struct Session {
    client: Client,
    stored: Stored,
    token: Option<Held>,
}

struct Held {
    token: Token,
    /// When the lease ends (`None`: a token that does not expire, or one given as it is).
    expires: Option<Instant>,
    renewable: bool,
    lease: Duration,
}

#[derive(Default)]
struct Inner {
    session: Option<Session>,
    cache: HashMap<OpenBaoRef, Cached>,
    last_error: Option<String>,
}

/// The agent's OpenBao side. One per agent.
pub(crate) struct Remote {
    settings: Settings,
    inner: Mutex<Inner>,
}

impl Remote {
    pub(crate) fn new(settings: Settings, stored: Option<Stored>) -> Self {
        let remote = Self {
            settings,
            inner: Mutex::default(),
        };
        remote.replace(stored);
        remote
    }

    /// A new login (or none): the old token and every cached secret are dropped.
    pub(crate) fn replace(&self, stored: Option<Stored>) {
        let mut inner = self.lock();
        inner.cache.clear();
        inner.last_error = None;
        inner.session = stored.and_then(|stored| match self.client(&stored.login) {
            Ok(client) => Some(Session {
                client,
                stored,
                token: None,
            }),
            Err(e) => {
                inner.last_error = Some(e.to_string());
                None
            }
        });
    }

    /// Reloads the login from the store (after `vault openbao login` or `logout`).
    pub(crate) fn reload(&self, conn: &rusqlite::Connection) {
        match login::load(conn) {
            Ok(stored) => self.replace(stored),
            Err(e) => {
                self.replace(None);
                self.lock().last_error = Some(e.to_string());
            }
        }
    }

    /// Whether the vault has an OpenBao login.
    pub(crate) fn is_logged_in(&self) -> bool {
        self.lock().session.is_some()
    }

    fn client(&self, login: &OpenBaoLogin) -> Result<Client, openbao::Error> {
        let mut config = openbao::Config::new(&login.address);
        config.ca_file = login.ca_file.as_ref().map(Into::into);
        config.timeout = Duration::from_secs(self.settings.timeout_seconds);
        config.connect_timeout = config.timeout.min(Duration::from_secs(3));
        Client::new(&config)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn window(&self) -> Duration {
        Duration::from_secs(self.settings.secret_cache_seconds)
    }

    /// The KV version a call made now would send: the cached one inside the window, else the
    /// latest, read now (and cached with its value).
    pub(crate) fn current_version(&self, r: &OpenBaoRef) -> Result<u64, RemoteError> {
        let mut inner = self.lock();
        let window = self.window();
        inner.cache.retain(|_, c| c.read_at.elapsed() < window);
        if let Some(c) = inner.cache.get(r) {
            return Ok(c.version);
        }
        let read = self.read(&mut inner, r, None)?;
        let version = read.version;
        if !window.is_zero() {
            inner.cache.insert(r.clone(), read);
        }
        Ok(version)
    }

    /// The secret at exactly `version` (what the action's hash covers): the cached value if it
    /// is that version and inside the window, else read now.
    pub(crate) fn secret(&self, r: &OpenBaoRef, version: u64) -> Result<Secret, RemoteError> {
        let mut inner = self.lock();
        let window = self.window();
        inner.cache.retain(|_, c| c.read_at.elapsed() < window);
        if let Some(c) = inner.cache.get(r).filter(|c| c.version == version) {
            return Ok(Secret::new(c.value.expose().to_vec()));
        }
        Ok(self.read(&mut inner, r, Some(version))?.value)
    }

    /// Reads `r` (at `version`, or the latest).
    fn read(
        &self,
        inner: &mut Inner,
        r: &OpenBaoRef,
        version: Option<u64>,
    ) -> Result<Cached, RemoteError> {
        let result = self.with_token(inner, |client, token| {
            client.kv_read(token, &r.mount, &r.path, &r.field, version)
        });
        inner.last_error = result.as_ref().err().map(ToString::to_string);
        let kv = result?;
        Ok(Cached {
            version: kv.version,
            value: Secret::new(kv.value.expose_secret().as_bytes().to_vec()),
            read_at: Instant::now(),
        })
    }

    /// Runs `f` with a valid token; a token OpenBao refuses (403) is replaced by a fresh AppRole
    /// login and `f` run once more (no other retry).
    fn with_token<T>(
        &self,
        inner: &mut Inner,
        f: impl Fn(&Client, &Token) -> Result<T, openbao::Error>,
    ) -> Result<T, RemoteError> {
        let once = |inner: &mut Inner| -> Result<T, RemoteError> {
            let session = inner.session.as_mut().ok_or(RemoteError::NotLoggedIn)?;
            token(session)?;
            let held = &session.token.as_ref().expect("a token was just had").token;
            Ok(f(&session.client, held)?)
        };
        match once(inner) {
            Err(RemoteError::Bao(openbao::Error::Forbidden {
                refusal: Refusal::Permission,
                ..
            })) if inner
                .session
                .as_ref()
                .is_some_and(|s| matches!(s.stored.login.auth, OpenBaoAuth::Approle { .. })) =>
            {
                if let Some(s) = inner.session.as_mut() {
                    s.token = None;
                }
                once(inner)
            }
            other => other,
        }
    }

    /// What a dispatch needs from OpenBao: the KV value at its version, or an ephemeral key and
    /// the CA's certificate for it (with what the journal records of the certificate).
    pub(crate) fn fetch(&self, what: &FromOpenBao) -> Result<Fetched, RemoteError> {
        match what {
            FromOpenBao::Kv(r, v) => Ok(Fetched {
                secret: self.secret(r, *v)?,
                cert: None,
            }),
            FromOpenBao::Cert { mount, role, user } => self.ssh_cert(mount, role, user),
        }
    }

    /// An ed25519 key made now in memory, signed by the SSH CA at `mount` under `role` for
    /// `user` only, valid `CERT_TTL`. The secret is the key's OpenSSH text then the certificate.
    fn ssh_cert(&self, mount: &str, role: &str, user: &str) -> Result<Fetched, RemoteError> {
        use russh::keys::ssh_key::private::Ed25519Keypair;
        use russh::keys::ssh_key::LineEnding;
        let mut seed = zeroize::Zeroizing::new([0u8; 32]);
        getrandom::fill(&mut seed[..]).expect("the OS random number generator failed");
        let key = russh::keys::PrivateKey::from(Ed25519Keypair::from_seed(&seed));
        let public = key
            .public_key()
            .to_openssh()
            .map_err(|e| RemoteError::Key(e.to_string()))?;
        let pem = key
            .to_openssh(LineEnding::LF)
            .map_err(|e| RemoteError::Key(e.to_string()))?;
        let signed = {
            let mut inner = self.lock();
            let result = self.sign_once(&mut inner, mount, role, &public, user);
            inner.last_error = result.as_ref().err().map(ToString::to_string);
            result?
        };
        let cert =
            russh::keys::Certificate::from_openssh(signed.certificate.trim()).map_err(|e| {
                RemoteError::Key(format!(
                    "the certificate OpenBao signed cannot be read: {e}"
                ))
            })?;
        let mut text = zeroize::Zeroizing::new(String::with_capacity(
            pem.len() + signed.certificate.len() + 1,
        ));
        text.push_str(&pem);
        text.push('\n');
        text.push_str(signed.certificate.trim());
        Ok(Fetched {
            secret: Secret::new(text.as_bytes().to_vec()),
            cert: Some(CertInfo {
                serial: signed.serial,
                role: role.to_owned(),
                principal: user.to_owned(),
                valid_after: cert.valid_after(),
                valid_before: cert.valid_before(),
            }),
        })
    }

    fn sign_once(
        &self,
        inner: &mut Inner,
        mount: &str,
        role: &str,
        public: &str,
        user: &str,
    ) -> Result<openbao::SignedCert, RemoteError> {
        self.with_token(inner, |client, token| {
            client.ssh_sign(token, mount, role, public, &[user], CERT_TTL)
        })
    }

    /// `vault openbao status` from a running agent: the login, and how its token stands.
    pub(crate) fn view(&self) -> crate::wire::protocol::OpenBaoView {
        let inner = self.lock();
        let token = inner.session.as_ref().map(|s| match &s.token {
            None => {
                "no token yet: the agent logs in at the first call that needs a secret".to_owned()
            }
            Some(h) => match h.expires {
                Some(at) => {
                    let left = at.saturating_duration_since(Instant::now()).as_secs();
                    format!(
                        "token valid for {left} s more{}",
                        if h.renewable {
                            ", renewed before it ends"
                        } else {
                            ", not renewable"
                        }
                    )
                }
                None => "token without expiry".to_owned(),
            },
        });
        crate::wire::protocol::OpenBaoView {
            login: inner.session.as_ref().map(|s| s.stored.login.clone()),
            token,
            last_error: inner.last_error.clone(),
        }
    }
}

/// A token good for the next request: the held one (renewed once past half its lease), or a new
/// one from an AppRole login (or the token the person gave).
fn token(s: &mut Session) -> Result<(), RemoteError> {
    let now = Instant::now();
    let usable = s
        .token
        .as_ref()
        .is_some_and(|h| h.expires.is_none_or(|at| at > now + Duration::from_secs(5)));
    if !usable {
        s.token = None;
    }
    if let Some(h) = s.token.as_mut() {
        let half_gone = h
            .expires
            .is_some_and(|at| at.saturating_duration_since(now) < h.lease / 2);
        if h.renewable && half_gone {
            match s.client.renew_self(&h.token, Some(h.lease)) {
                Ok(renewed) => {
                    h.expires = Some(now + renewed.lease);
                    h.lease = renewed.lease;
                    h.renewable = renewed.renewable;
                    h.token = renewed.token;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the OpenBao token could not be renewed; it is used until it ends")
                }
            }
        }
    } else {
        s.token = Some(login(s)?);
    }
    Ok(())
}

fn login(s: &Session) -> Result<Held, RemoteError> {
    let secret = std::str::from_utf8(s.stored.secret.expose()).map_err(|_| {
        RemoteError::Store(StoreError::Damaged(
            "the stored OpenBao secret is not text; log in again with `vault openbao login`",
        ))
    })?;
    match &s.stored.login.auth {
        OpenBaoAuth::Approle { mount, role_id } => {
            let l = s
                .client
                .login_approle(mount, role_id, &SecretString::from(secret))?;
            tracing::info!(
                lease_s = l.lease.as_secs(),
                "logged in to OpenBao with AppRole"
            );
            Ok(Held {
                expires: (!l.lease.is_zero()).then(|| Instant::now() + l.lease),
                renewable: l.renewable,
                lease: l.lease,
                token: l.token,
            })
        }
        OpenBaoAuth::Token => Ok(Held {
            token: Token::new(SecretString::from(secret)),
            expires: None,
            renewable: false,
            lease: Duration::ZERO,
        }),
    }
}

/// Journals the certificate an action's connection logs in with (`openbao.cert`).
pub(crate) fn journal_cert(
    store: &mut crate::store::Store,
    session: &str,
    action: &str,
    cert: CertInfo,
) -> Result<(), StoreError> {
    let body = crate::wire::journal::OpenBaoCertIssued {
        action: action.to_owned(),
        serial: cert.serial,
        role: cert.role,
        principal: cert.principal,
        valid_after: cert.valid_after,
        valid_before: cert.valid_before,
    };
    let tx = store.write()?;
    crate::audit::append(&tx, Some(session), None, &body)
        .map_err(|_| StoreError::Damaged("the journal could not be appended to"))?;
    tx.commit()
}
