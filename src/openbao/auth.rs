//! AppRole login and the token's own endpoints (renew-self, lookup-self). The token lives in a
//! `SecretString`: wiped when dropped, `[REDACTED]` in Debug, and sent only in the token header.

use super::{api_path, parse, Call, Client, Error, Refusal};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use std::time::Duration;
use zeroize::Zeroizing;

/// An OpenBao token. Its Debug output is `Token([REDACTED])`.
pub struct Token(SecretString);

impl Token {
    /// A token the person gave (`--token-stdin`) or the vault stored.
    pub fn new(token: SecretString) -> Self {
        Self(token)
    }

    /// The token itself, for the request header or for storing it encrypted.
    pub fn expose_secret(&self) -> &str {
        self.0.expose_secret()
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token([REDACTED])")
    }
}

/// What a login or a renewal gives: the token and how long it lives.
#[derive(Debug)]
pub struct Login {
    pub token: Token,
    /// The token's lease: it expires this long after the answer unless renewed.
    pub lease: Duration,
    pub renewable: bool,
    pub policies: Vec<String>,
    /// The token's accessor: names the token in OpenBao's audit log; it cannot be used as the
    /// token.
    pub accessor: String,
}

/// What `lookup-self` says about the token (never the token itself, which OpenBao also returns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenInfo {
    /// The time left before it expires (zero for a token that never expires, like a root token).
    pub ttl: Duration,
    pub renewable: bool,
    pub policies: Vec<String>,
    /// RFC 3339, or `None` for a token without an expiry.
    pub expire_time: Option<String>,
    pub display_name: String,
}

#[derive(Deserialize)]
struct AuthBody {
    auth: Option<RawAuth>,
}

#[derive(Deserialize)]
struct RawAuth {
    client_token: Zeroizing<String>,
    lease_duration: u64,
    renewable: bool,
    #[serde(default)]
    policies: Vec<String>,
    #[serde(default)]
    accessor: String,
}

impl RawAuth {
    fn into_login(self) -> Login {
        Login {
            // Copied once into an exact-size box; the parsed copy is wiped when `self` drops.
            token: Token(SecretString::from(self.client_token.as_str())),
            lease: Duration::from_secs(self.lease_duration),
            renewable: self.renewable,
            policies: self.policies,
            accessor: self.accessor,
        }
    }
}

impl Client {
    /// Logs in with AppRole at `auth/MOUNT/login` (`mount` is usually `approle`).
    pub fn login_approle(
        &self,
        mount: &str,
        role_id: &str,
        secret_id: &SecretString,
    ) -> Result<Login, Error> {
        #[derive(serde::Serialize)]
        struct Body<'a> {
            role_id: &'a str,
            secret_id: &'a str,
        }
        let path = format!("auth/{}", api_path(mount, None, "login")?);
        let secret = secret_id.expose_secret();
        let call = Call {
            method: "POST",
            path: &path,
            secrets: &[role_id, secret],
        };
        let body = Zeroizing::new(
            serde_json::to_vec(&Body {
                role_id,
                secret_id: secret,
            })
            .expect("two strings serialize"),
        );
        let reply = self.send(&call, None, None, Some(&body))?;
        // AppRole answers a refused pair with 400 "invalid role or secret ID" (also for an
        // expired secret_id), not 403.
        if reply.status == 400
            && super::error::server_text(&reply.body, call.secrets).contains("invalid role")
        {
            return Err(Error::Forbidden {
                path,
                refusal: Refusal::Login,
            });
        }
        let body = reply.ok(self, &call)?;
        auth_of(&body, &path)
    }

    /// Renews the token (`auth/token/renew-self`), asking for `increment` more when given; the
    /// server may grant less (the role's max TTL).
    pub fn renew_self(&self, token: &Token, increment: Option<Duration>) -> Result<Login, Error> {
        let path = "auth/token/renew-self";
        let call = Call {
            method: "POST",
            path,
            secrets: &[token.expose_secret()],
        };
        let body = match increment {
            Some(d) => serde_json::json!({ "increment": format!("{}s", d.as_secs()) }).to_string(),
            None => "{}".to_owned(),
        };
        let body = self
            .send(&call, Some(token), None, Some(body.as_bytes()))?
            .ok(self, &call)?;
        auth_of(&body, path)
    }

    /// What the server knows about the token (`auth/token/lookup-self`).
    pub fn lookup_self(&self, token: &Token) -> Result<TokenInfo, Error> {
        // `data.id` (the token itself) is not a field here, so it is never kept.
        #[derive(Deserialize)]
        struct Body {
            data: Data,
        }
        #[derive(Deserialize)]
        struct Data {
            ttl: u64,
            #[serde(default)]
            renewable: bool,
            #[serde(default)]
            policies: Vec<String>,
            expire_time: Option<String>,
            #[serde(default)]
            display_name: String,
        }
        let path = "auth/token/lookup-self";
        let call = Call {
            method: "GET",
            path,
            secrets: &[token.expose_secret()],
        };
        let body = self.send(&call, Some(token), None, None)?.ok(self, &call)?;
        let d = parse::<Body>(&body, path)?.data;
        Ok(TokenInfo {
            ttl: Duration::from_secs(d.ttl),
            renewable: d.renewable,
            policies: d.policies,
            expire_time: d.expire_time,
            display_name: d.display_name,
        })
    }
}

fn auth_of(body: &[u8], path: &str) -> Result<Login, Error> {
    match parse::<AuthBody>(body, path)?.auth {
        Some(a) => Ok(a.into_login()),
        None => Err(Error::Unexpected {
            path: path.to_owned(),
            what: "it holds no `auth` object".to_owned(),
        }),
    }
}
