//! The HTTP executor: ureq on a pinned, guarded address; the credential injected (bearer, basic,
//! header template, query parameter); no redirects; the response body streamed through the
//! scrubber with a retained head bound while every byte is counted; a small header allowlist;
//! JSON when it parses (its strings scrubbed again after decoding), else untrusted text (scrubbed
//! again after control characters are removed). Connections are kept between the actions of one
//! credential version (`kept.rs`). Outcome truth: `failed_before_send` only when no byte of the
//! request left the machine.
use super::bounded::{Capture, Captured, Keep, Scrubber};
use super::budget::Budget;
use super::guard::{resolve_checked, GuardError};
use super::kept::{self, Agents, Marked};
use super::redact::Redactor;
use super::tls::{Shared, TlsClients};
use super::{untrusted_text, Cancel, Executor, Outcome};
use crate::approvals::{AuthorizedAction, State};
use crate::credentials::{HttpAuth, Target};
use crate::policy::ValidatedRequest;
use base64::Engine;
use serde_json::{json, Map, Value};
use std::io::Read;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{Connector, TcpConnector};
use zeroize::Zeroizing;

/// Response headers an agent may see (never Set-Cookie).
const HEADER_ALLOWLIST: &[&str] = &[
    "content-type",
    "content-length",
    "location",
    "retry-after",
    "etag",
    "last-modified",
    "cache-control",
    "x-request-id",
    "ratelimit-limit",
    "ratelimit-remaining",
    "ratelimit-reset",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "link",
];

/// The production HTTP executor, with the byte bounds of `config.toml` `[limits]`.
#[derive(Debug)]
pub struct HttpExecutor {
    /// Response body bytes kept per call (head); the rest is counted and dropped.
    retained_per_call: usize,
    /// Shared by every call of the process.
    budget: Arc<Budget>,
    /// The TLS client configurations, one per set of roots.
    tls: TlsClients,
    /// The clients (and their idle connections) kept per credential version and addresses.
    agents: Agents,
    /// Where a proxied response too large for the reply is written (`<vault>/relayed`).
    relayed: Option<std::path::PathBuf>,
}

impl HttpExecutor {
    pub fn new(limits: &crate::config::Limits) -> Self {
        Self {
            retained_per_call: limits.output_retained_per_call_bytes,
            budget: Budget::new(limits.output_retained_process_bytes),
            tls: TlsClients::default(),
            agents: Agents::default(),
            relayed: None,
        }
    }

    /// Proxied responses past the reply's bound go to `<dir>/<action id>.body`.
    pub fn relaying_into(mut self, dir: std::path::PathBuf) -> Self {
        self.relayed = Some(dir);
        self
    }
}

#[derive(Debug)]
struct Pinned(Vec<SocketAddr>);

impl Resolver for Pinned {
    fn resolve(
        &self,
        _uri: &ureq::http::Uri,
        _config: &ureq::config::Config,
        _timeout: ureq::unversioned::transport::NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let mut out = self.empty();
        for a in self.0.iter().take(16) {
            out.push(*a);
        }
        Ok(out)
    }
}

fn failed(reason: String) -> Outcome {
    Outcome {
        state: State::FailedBeforeSend,
        result: json!({}),
        reason: Some(reason),
    }
}

impl Executor for HttpExecutor {
    fn execute(&self, action: &AuthorizedAction, cancel: &Cancel) -> Outcome {
        if cancel.is_cancelled() {
            return failed("the call was cancelled before anything was sent".into());
        }
        let (ValidatedRequest::Http(req), Target::Http(target)) =
            (action.request(), &action.credential().target)
        else {
            return failed("not an HTTP action".into());
        };
        let secret = action.secret().expose();
        let cred_name = &action.credential().name;
        let basic_user = match &target.auth {
            HttpAuth::Basic { username } => Some(username.as_str()),
            _ => None,
        };
        let redactor = Redactor::new(secret, basic_user, cred_name);
        let mut url = match url::Url::parse(&req.url) {
            Ok(u) => u,
            Err(e) => return failed(format!("the URL does not parse: {e}")),
        };
        let secret_text = Zeroizing::new(String::from_utf8_lossy(secret).into_owned());
        if let HttpAuth::Query { param } = &target.auth {
            url.query_pairs_mut().append_pair(param, &secret_text);
        }
        let host = url
            .host_str()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = url.port_or_known_default().unwrap_or(443);
        let addrs = match resolve_checked(&host, port, &target.host) {
            Ok(a) => a,
            Err(GuardError::Resolve(h)) => return failed(format!("cannot resolve {h}")),
            Err(e) => return failed(e.to_string()),
        };
        let tls = match self.tls.roots(target.ca_file.as_deref()) {
            Ok(t) => t,
            Err(why) => return failed(why),
        };
        let key = kept::Key {
            credential_id: action.credential().id.clone(),
            version: action.credential().version,
            roots: tls.roots_key,
            addrs: addrs.clone(),
            timeout_s: req.timeout_s,
        };
        let agent = self
            .agents
            .agent(key, || agent_for(tls, req.timeout_s, addrs));
        let mut builder = ureq::http::Request::builder()
            .method(req.method.as_str())
            .uri(url.as_str());
        for (k, v) in &req.headers {
            builder = builder.header(k, v);
        }
        builder = with_credential(builder, &target.auth, &secret_text);
        let request = match builder.body(req.body.clone().unwrap_or_default()) {
            Ok(r) => r,
            Err(e) => return failed(redactor.scrub_str(&format!("cannot build the request: {e}"))),
        };
        kept::begin_request();
        let response = match agent.run(request) {
            Ok(r) => r,
            Err(e) => {
                let mut out = outcome_of_error(&e, kept::request_began(), &redactor);
                if speaks_plain_http(&e) {
                    out.reason = Some(plain_http_reason(cred_name, target));
                }
                return out;
            }
        };
        if req.proxied {
            let scrubber = Scrubber::new(vec![redactor]);
            let spill = self
                .relayed
                .as_deref()
                .map(|d| super::relayed_body(d, action.action_id()));
            return super::proxied::read(
                response,
                req.max_output_bytes,
                scrubber,
                spill.as_deref(),
            );
        }
        read_response(
            response,
            req.max_output_bytes as usize,
            Capture::new(
                "body",
                Keep::Head,
                self.retained_per_call,
                &self.budget,
                Scrubber::new(vec![redactor]),
            ),
        )
    }
}

/// A credential version's client: no proxy, no redirects, the request's timeouts, the
/// credential's TLS roots (the process's client for them), and connections only to `addrs` (the
/// checked addresses of the credential's host): TCP, then TLS for https, then `Marked`. Idle
/// connections are kept `kept::IDLE_KEPT`.
fn agent_for(tls: Shared, timeout_s: u64, addrs: Vec<std::net::SocketAddr>) -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        // Never a proxy from HTTP(S)_PROXY / ALL_PROXY: the request goes to the checked
        // address of the credential's own host, and nowhere else.
        .proxy(None)
        .max_redirects(0)
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(timeout_s)))
        .timeout_connect(Some(Duration::from_secs(timeout_s.min(10))))
        .tls_config(tls.config.clone())
        .user_agent(concat!("agent-vault/", env!("CARGO_PKG_VERSION")))
        .max_idle_age(kept::IDLE_KEPT)
        .max_idle_connections(kept::IDLE_PER_AGENT)
        .max_idle_connections_per_host(kept::IDLE_PER_AGENT)
        .build();
    ureq::Agent::with_parts(
        config,
        ().chain(TcpConnector::default()).chain(tls).chain(Marked),
        Pinned(addrs),
    )
}

/// Injects the credential (a query credential was added to the URL already). The header values
/// that hold the secret are built in zeroizing buffers; the request keeps its own copy.
fn with_credential(
    builder: ureq::http::request::Builder,
    auth: &HttpAuth,
    secret_text: &str,
) -> ureq::http::request::Builder {
    let value: Zeroizing<String> = Zeroizing::new(match auth {
        HttpAuth::Bearer => format!("Bearer {secret_text}"),
        HttpAuth::Basic { username } => {
            let pair = Zeroizing::new(format!("{username}:{secret_text}"));
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair.as_bytes())
            )
        }
        HttpAuth::Header { format, .. } => format.replace("{secret}", secret_text),
        HttpAuth::Query { .. } => return builder,
    });
    let name = match auth {
        HttpAuth::Header { name, .. } => name.as_str(),
        _ => "authorization",
    };
    builder.header(name, value.as_str())
}

/// `began`: whether the request began to go out (`kept::request_began`). A TLS verification
/// failure surfaces from ureq as an I/O error, so the error kind alone cannot tell before from
/// after.
///
/// The reason is the vault's own words for the kind of failure; the library's text (which can
/// quote the target: a certificate's names, a malformed status line) goes under `error_detail`,
/// wrapped as third-party text, scrubbed and bounded.
fn outcome_of_error(e: &ureq::Error, began: bool, redactor: &Redactor) -> Outcome {
    let text = redactor.scrub_str(&untrusted_text(&e.to_string(), 2048));
    let result = json!({"error_detail": super::untrusted("text", json!(text))});
    let what = error_kind(e);
    if !began {
        Outcome {
            state: State::FailedBeforeSend,
            result,
            reason: Some(format!("nothing was sent: {what}")),
        }
    } else {
        Outcome {
            state: State::Indeterminate,
            result,
            reason: Some(format!("the request may have reached the target: {what}")),
        }
    }
}

/// Whether a TLS handshake failed because the port answered in plain HTTP (rustls reads the
/// server's `HTTP/1.1 400` as a record of an invalid content type).
fn speaks_plain_http(e: &ureq::Error) -> bool {
    let text = match e {
        ureq::Error::Io(io) => io.to_string(),
        ureq::Error::Rustls(r) => r.to_string(),
        ureq::Error::Tls(t) => t.to_string(),
        _ => return false,
    };
    text.contains("InvalidContentType") || text.contains("corrupt message")
}

/// What to say, and what the person can run, when an https:// binding meets a plain-HTTP port.
fn plain_http_reason(cred_name: &str, target: &crate::credentials::HttpTarget) -> String {
    let at = if target.host.contains(':') {
        format!("[{}]:{}", target.host, target.port)
    } else {
        format!("{}:{}", target.host, target.port)
    };
    if crate::credentials::is_loopback(&target.host) {
        format!("nothing was sent: the credential is bound to https://{at}, but that port speaks plain HTTP, not TLS. If it is a plain-HTTP server, the person binds the credential to it with `vault edit {cred_name} --host http://{at}`")
    } else {
        format!("nothing was sent: the credential is bound to https://{at}, but that port speaks plain HTTP, not TLS; the person should check the port (`vault edit {cred_name} --host https://HOST:PORT` moves the binding)")
    }
}

/// A failure in the vault's words (never the library's text, which may quote the target).
fn error_kind(e: &ureq::Error) -> &'static str {
    use std::io::ErrorKind as K;
    match e {
        ureq::Error::HostNotFound => "the host name does not resolve",
        ureq::Error::Timeout(_) => "the target did not answer in time",
        ureq::Error::ConnectionFailed => "the connection could not be made",
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) | ureq::Error::TlsRequired => {
            "the TLS handshake failed (see error_detail; a plain-HTTP port answers TLS with garbage)"
        }
        ureq::Error::Io(io) => match io.kind() {
            K::ConnectionRefused => "the connection was refused (nothing listens on that port)",
            K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => {
                "the target closed the connection"
            }
            K::TimedOut | K::WouldBlock => "the target did not answer in time",
            // A TLS failure arrives as an I/O error; its text only picks the vault's words.
            K::InvalidData if io.to_string().contains("certificate") => {
                "the target's TLS certificate was not accepted (see error_detail)"
            }
            K::InvalidData if io.to_string().contains("corrupt message") => {
                "the TLS handshake failed: the port may speak plain HTTP (bind the credential to http:// for a loopback target)"
            }
            K::InvalidData => "the target's answer could not be read (see error_detail)",
            _ => "an I/O error (see error_detail)",
        },
        ureq::Error::Protocol(_) | ureq::Error::Http(_) | ureq::Error::LargeResponseHeader(..) => {
            "the target's answer is not valid HTTP"
        }
        _ => "the request failed (see error_detail)",
    }
}

/// `capture` scrubs the body and keeps its head within the per-call and process bounds.
fn read_response(
    mut response: ureq::http::Response<ureq::Body>,
    agent_bytes: usize,
    mut capture: Capture,
) -> Outcome {
    let status = response.status().as_u16();
    let mut headers = Map::new();
    for (name, value) in response.headers() {
        let n = name.as_str().to_ascii_lowercase();
        if HEADER_ALLOWLIST.contains(&n.as_str()) {
            // Scrubbed before and after cleaning: removing a control character from the middle
            // of an echo must not join the halves of a secret back together.
            let v = capture.scrub_str(&String::from_utf8_lossy(value.as_bytes()));
            headers.insert(n, json!(capture.scrub_str(&untrusted_text(&v, 2048))));
        }
    }
    let content_type = headers
        .get("content-type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_ascii_lowercase();
    let mut reader = response.body_mut().with_config().limit(u64::MAX).reader();
    let mut buf = vec![0u8; 64 * 1024];
    let mut stream_error = None;
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => capture.push(&buf[..n]),
            Err(e) => {
                stream_error = Some(capture.scrub_str(&e.to_string()));
                break;
            }
        }
    }
    let done = capture.finish();
    let seen = done.bytes_seen;
    let mut cut = done.text.len().min(agent_bytes);
    while !done.text.is_char_boundary(cut) {
        cut -= 1;
    }
    let returned = &done.text[..cut];
    // Lengths differ from `seen` once secrets are replaced, so truncation is tracked, not inferred.
    let truncated = done.dropped || cut < done.text.len() || stream_error.is_some();
    let body = if !truncated && content_type.contains("json") {
        match serde_json::from_str::<Value>(returned) {
            Ok(mut v) => {
                // Decoding `\u` escapes can spell out what the byte scan did not see; then every
                // string is cleaned like text (the scrub again: removing a control character must
                // not join the halves of a secret).
                done.scrub_json(&mut v);
                super::clean_json(&mut v);
                done.scrub_json(&mut v);
                super::untrusted("json", v)
            }
            Err(_) => text_body(returned, &done),
        }
    } else {
        text_body(returned, &done)
    };
    // Every header value came from the target: wrapped like the body.
    let mut result = json!({"http": {"status": status, "headers": super::untrusted("headers", Value::Object(headers)), "body": body, "body_bytes_seen": seen, "body_truncated": truncated}});
    match stream_error {
        // The target answered (a status was observed); the body broke off.
        Some(e) => Outcome {
            state: State::Completed,
            reason: Some("the response body ended early".into()),
            result: {
                result["error_detail"] = super::untrusted("text", json!(e));
                result
            },
        },
        None => Outcome {
            state: State::Completed,
            result,
            reason: None,
        },
    }
}

fn text_body(text: &str, done: &Captured) -> Value {
    let text = untrusted_text(text, text.len().max(1));
    super::untrusted("text", json!(done.scrub_str(&text)))
}
