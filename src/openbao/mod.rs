//! openbao: a small typed client for a team's OpenBao server (AppRole login and token renewal,
//! KV v2 reads and check-and-set writes, SSH CA signing, the seal status), over the crate's one
//! HTTP stack (ureq with rustls). TLS verifies the server (the platform's roots, or a CA file for
//! a private CA); every request has a connect deadline and an overall one and is made once (no
//! retries: a caller decides whether to try again); no error, Debug output or log line carries a
//! token, a secret_id or a KV value. It owns no state: the agent and the CLI keep the token.

mod address;
mod auth;
mod error;
mod kv;
mod ssh;

pub use auth::{Login, Token, TokenInfo};
pub use error::{Error, Refusal};
pub use kv::{KvMetadata, KvSecret};
pub use ssh::{SealStatus, SignedCert};

use address::{api_path, check_address, tls_config};
use std::path::PathBuf;
use std::time::Duration;
use zeroize::Zeroizing;

/// The header OpenBao (like HashiCorp Vault) reads the token from.
const TOKEN_HEADER: &str = "X-Vault-Token";
/// No answer of the API this client uses is near this; a bigger one is refused, not buffered.
const MAX_BODY: u64 = 1 << 20;

/// Where the server is and how long to wait for it.
#[derive(Debug, Clone)]
pub struct Config {
    /// `https://HOST[:PORT]`; `http://` only for a loopback host (a dev server).
    pub address: String,
    /// PEM certificates to trust instead of the platform's roots (a private CA).
    pub ca_file: Option<PathBuf>,
    /// The deadline to open the connection (and finish the TLS handshake).
    pub connect_timeout: Duration,
    /// The deadline for the whole request, connection included.
    pub timeout: Duration,
}

impl Config {
    /// The address with the default deadlines: 3 s to connect, 10 s in all.
    pub fn new(address: &str) -> Self {
        Self {
            address: address.to_owned(),
            ca_file: None,
            connect_timeout: Duration::from_secs(3),
            timeout: Duration::from_secs(10),
        }
    }
}

/// A client for one OpenBao server. Cheap to clone (the connection pool is shared).
#[derive(Clone)]
pub struct Client {
    address: String,
    agent: ureq::Agent,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

/// One request's answer after the transport succeeded: its status and its body, which is wiped
/// when dropped (it may hold a token or a KV value).
pub(super) struct Reply {
    pub(super) status: u16,
    pub(super) body: Zeroizing<Vec<u8>>,
}

/// What a request is, for the error messages: the method and the API path (no secrets).
pub(super) struct Call<'a> {
    pub(super) method: &'static str,
    pub(super) path: &'a str,
    /// The secrets this request sends, scrubbed out of any error text the server echoes.
    pub(super) secrets: &'a [&'a str],
}

impl Client {
    pub fn new(config: &Config) -> Result<Self, Error> {
        let address = check_address(&config.address)?;
        let tls = tls_config(config.ca_file.as_deref())?;
        let agent_config = ureq::Agent::config_builder()
            // Never a proxy from the environment: the token goes to the named server only.
            .proxy(None)
            // A standby node's redirect is reported, not followed with the token.
            .max_redirects(0)
            .http_status_as_error(false)
            .timeout_connect(Some(config.connect_timeout))
            .timeout_global(Some(config.timeout))
            .tls_config(tls)
            .user_agent(concat!("agent-vault/", env!("CARGO_PKG_VERSION")))
            .build();
        Ok(Self {
            address,
            agent: ureq::Agent::new_with_config(agent_config),
        })
    }

    /// The server's address as the client uses it (`scheme://host:port`).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Sends one request (a GET without a body, a POST with one) and reads the answer. Only the
    /// transport can fail here; the caller maps the status (`Reply::ok` for the common cases).
    pub(super) fn send(
        &self,
        call: &Call<'_>,
        token: Option<&Token>,
        query: Option<(&str, String)>,
        body: Option<&[u8]>,
    ) -> Result<Reply, Error> {
        let url = format!("{}/v1/{}", self.address, call.path);
        let result = match body {
            None => {
                let mut req = self.agent.get(&url);
                if let Some(t) = token {
                    req = req.header(TOKEN_HEADER, t.expose_secret());
                }
                if let Some((k, v)) = &query {
                    req = req.query(*k, v);
                }
                req.call()
            }
            Some(b) => {
                let mut req = self
                    .agent
                    .post(&url)
                    .header("content-type", "application/json");
                if let Some(t) = token {
                    req = req.header(TOKEN_HEADER, t.expose_secret());
                }
                req.send(b)
            }
        };
        let mut response = result.map_err(|e| self.transport(call, &e))?;
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_vec()
            .map_err(|e| self.transport(call, &e))?;
        Ok(Reply {
            status,
            body: Zeroizing::new(body),
        })
    }

    /// A transport failure in the client's own words (ureq's text may quote the server).
    fn transport(&self, call: &Call<'_>, e: &ureq::Error) -> Error {
        use std::io::ErrorKind as K;
        let address = self.address.clone();
        let unreachable = |why| Error::Unreachable {
            address: address.clone(),
            why,
        };
        let tls = |why| Error::Tls {
            address: address.clone(),
            why,
        };
        match e {
            ureq::Error::Timeout(_) => unreachable("it did not answer within the deadline"),
            ureq::Error::HostNotFound => unreachable("the host name does not resolve"),
            ureq::Error::ConnectionFailed => unreachable("the connection could not be made"),
            ureq::Error::Tls(_) | ureq::Error::Rustls(_) | ureq::Error::TlsRequired => {
                tls("the TLS handshake failed")
            }
            ureq::Error::Io(io) => match io.kind() {
                K::ConnectionRefused => {
                    unreachable("the connection was refused (nothing listens on that port)")
                }
                K::TimedOut | K::WouldBlock => unreachable("it did not answer within the deadline"),
                K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof => {
                    unreachable("the server closed the connection")
                }
                K::InvalidData if io.to_string().contains("certificate") => {
                    tls("the server's certificate was not accepted")
                }
                K::InvalidData if io.to_string().contains("corrupt message") => {
                    tls("the port does not speak TLS (is it a plain-HTTP server?)")
                }
                K::HostUnreachable | K::NetworkUnreachable => {
                    unreachable("there is no route to the host")
                }
                _ => unreachable("an I/O error ended the request"),
            },
            ureq::Error::BodyExceedsLimit(_) => Error::Unexpected {
                path: call.path.to_owned(),
                what: "the answer is larger than 1 MiB".to_owned(),
            },
            _ => Error::Unexpected {
                path: call.path.to_owned(),
                what: "the answer is not valid HTTP".to_owned(),
            },
        }
    }
}

impl Reply {
    /// The body of a 2xx answer, or the error every endpoint shares for the others: 503 sealed,
    /// 403, 404, a redirect, anything else with OpenBao's (scrubbed) text.
    pub(super) fn ok(self, client: &Client, call: &Call<'_>) -> Result<Zeroizing<Vec<u8>>, Error> {
        let text = || error::server_text(&self.body, call.secrets);
        match self.status {
            200..=299 => Ok(self.body),
            503 if text().to_ascii_lowercase().contains("sealed") => Err(Error::Sealed {
                address: client.address.clone(),
            }),
            403 => Err(Error::Forbidden {
                path: call.path.to_owned(),
                refusal: Refusal::Permission,
            }),
            404 => Err(Error::NotFound {
                path: call.path.to_owned(),
                detail: None,
            }),
            300..=399 => Err(Error::Http {
                method: call.method,
                path: call.path.to_owned(),
                status: self.status,
                message: "a redirect (a standby node?); give the address of the active node or \
                          of the load balancer in front of the cluster"
                    .to_owned(),
            }),
            status => Err(Error::Http {
                method: call.method,
                path: call.path.to_owned(),
                status,
                message: text(),
            }),
        }
    }
}

/// Parses a 2xx body, naming the path when it is not the JSON expected.
pub(super) fn parse<'a, T: serde::Deserialize<'a>>(body: &'a [u8], path: &str) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|e| Error::Unexpected {
        path: path.to_owned(),
        // serde's message names the field and the position, never the value.
        what: format!("the JSON is not the expected shape ({})", e.classify_kind()),
    })
}

trait ClassifyKind {
    fn classify_kind(&self) -> &'static str;
}

impl ClassifyKind for serde_json::Error {
    fn classify_kind(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Io => "an I/O error",
            serde_json::error::Category::Syntax => "not valid JSON",
            serde_json::error::Category::Data => "a field is missing or of another type",
            serde_json::error::Category::Eof => "the JSON ends early",
        }
    }
}
