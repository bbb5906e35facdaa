//! HTTP requests: the URL must fall exactly inside the credential's scheme + host + port + path
//! prefix after normalization (percent-decoding, dot segments, IPv4 encodings, IPv4-mapped IPv6),
//! with no user info; headers that carry authority are the vault's, not the agent's.
use super::{path, PolicyError, MAX_BODY_BYTES};
use crate::credentials::http::{
    is_header_token, is_rewriting_header, FRAMING_HEADERS, METHOD_PARAM,
};
use crate::credentials::{HttpAuth, HttpTarget};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::IpAddr;
use url::{Host, Url};

/// `http_request` arguments as the agent sent them (unknown fields are refused by the caller).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpArgs {
    pub credential: String,
    pub method: String,
    pub url: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub query: BTreeMap<String, String>,
    pub body: Option<String>,
    pub json: Option<serde_json::Value>,
    pub timeout_s: Option<u64>,
    pub max_output_bytes: Option<u64>,
    pub idempotency_key: Option<String>,
    pub wait_s: Option<u64>,
    /// Set by `vault run`'s proxy, never by an agent (no JSON spells it): the request came from
    /// a tool inside the sandbox with a placeholder, and its response goes back byte for byte.
    #[serde(skip)]
    pub proxied: bool,
    /// Set by `vault run`'s proxy, never by an agent (no JSON spells it): the body as the tool
    /// sent it, any bytes (an agent's body is text, `body`, or JSON, `json`).
    #[serde(skip)]
    pub body_bytes: Option<Vec<u8>>,
}

/// A validated HTTP request: method, normalized URL (query included), agent headers (lowercase
/// names, sorted), optional body. The credential is injected only at dispatch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    pub timeout_s: u64,
    pub max_output_bytes: u64,
    /// Team mode: the KV version of the credential's OpenBao secret this request sends. Set by
    /// the caller that resolved it (`None` from `validate`), and hashed with the request.
    pub secret_version: Option<u64>,
    /// From `vault run`'s proxy (`HttpArgs::proxied`): answered byte for byte, up to
    /// `PROXIED_MAX_BYTES`, not as the tool's text.
    pub proxied: bool,
}

impl HttpRequest {
    /// Whether the request only reads: GET or HEAD, with no body, no request-rewriting header
    /// and no `_method` parameter (the `writes` policy runs only these without a card).
    pub fn is_read_only(&self) -> bool {
        super::scope::reads_only(&self.method, &self.url, &self.headers, self.body.is_some())
    }
}

/// Headers that carry authority: the vault's to set, never the agent's (besides the framing ones).
const AUTHORITY_HEADERS: &[&str] = &["authorization", "proxy-authorization", "cookie"];

pub(super) fn validate(t: &HttpTarget, a: HttpArgs) -> Result<HttpRequest, PolicyError> {
    let method = check_method(t, a.method)?;
    no_controls("url", "the URL", &a.url)?;
    let mut url = bind_url(t, &a.url)?;
    add_query(t, &mut url, &a.query)?;
    let mut headers = check_headers(t, a.headers)?;
    let body = match a.body_bytes {
        Some(bytes) if a.body.is_none() && a.json.is_none() => {
            let max = match a.proxied {
                true => super::PROXIED_BODY_MAX_BYTES,
                false => MAX_BODY_BYTES,
            };
            within_bound(bytes, max)?
        }
        Some(_) => {
            return Err(PolicyError::invalid(
                "body",
                "a body given both as bytes and as text or JSON",
                "send one body",
            ))
        }
        None => body_of(a.body, a.json, &mut headers)?,
    };
    let (timeout_s, max_output_bytes) = match a.proxied {
        // The proxy's response goes back whole or not at all: its own bound.
        true => (
            super::limits(a.timeout_s, None)?.0,
            super::PROXIED_MAX_BYTES,
        ),
        false => super::limits(a.timeout_s, a.max_output_bytes)?,
    };
    Ok(HttpRequest {
        method,
        url: url.to_string(),
        headers,
        body,
        timeout_s,
        max_output_bytes,
        secret_version: None,
        proxied: a.proxied,
    })
}

/// The method: one of the tool schema's enum (upper case), and one the credential allows.
fn check_method(t: &HttpTarget, method: String) -> Result<String, PolicyError> {
    // Exactly the tool schema's enum (held equal to `METHODS` by the parity test): upper case.
    if !crate::credentials::http_methods().contains(&method.as_str()) {
        return Err(PolicyError::invalid(
            "method",
            format!("{method:?} is not one of the tool's methods"),
            "use one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, in upper case",
        ));
    }
    if let Some(allowed) = &t.methods {
        if !allowed.contains(&method) {
            return Err(PolicyError::denied(
                format!("credential allows only {} (not {method})", allowed.join(", ")),
                "ask the person to widen the credential with `vault edit NAME --methods …`, or use an allowed method",
            ));
        }
    }
    Ok(method)
}

/// Adds the agent's query parameters to the bound URL: none may set the vault's own parameter,
/// and `_method` only where the credential allows it.
fn add_query(
    t: &HttpTarget,
    url: &mut Url,
    query: &std::collections::BTreeMap<String, String>,
) -> Result<(), PolicyError> {
    for (k, v) in query {
        no_controls("query", "a query parameter", k)?;
        no_controls("query", "a query value", v)?;
        if k.is_empty() {
            return Err(PolicyError::invalid(
                "query",
                "a parameter name is empty",
                "remove the empty name",
            ));
        }
        if let HttpAuth::Query { param } = &t.auth {
            if k == param {
                return Err(PolicyError::invalid(
                    "query",
                    format!("{k:?} is set by the vault from the credential"),
                    format!("remove {k:?} from query"),
                ));
            }
        }
        url.query_pairs_mut().append_pair(k, v);
    }
    if let HttpAuth::Query { param } = &t.auth {
        if url.query_pairs().any(|(k, _)| k == param.as_str()) {
            return Err(PolicyError::invalid(
                "url",
                format!("the query parameter {param:?} is set by the vault"),
                format!("remove {param:?} from the URL"),
            ));
        }
    }
    if url
        .query_pairs()
        .any(|(k, _)| k.eq_ignore_ascii_case(METHOD_PARAM))
        && !t.allow_headers.iter().any(|h| h == METHOD_PARAM)
    {
        return Err(PolicyError::denied(
            format!("the {METHOD_PARAM} query parameter makes many frameworks treat the request as another method"),
            format!("send the method itself (method: \"DELETE\"), not {METHOD_PARAM}; if the target needs it, ask the person to run `vault edit NAME --allow-header {METHOD_PARAM}`"),
        ));
    }
    Ok(())
}

/// The agent's headers, lower-cased and sorted: no authority, framing or injected header, no
/// rewriting header the credential does not allow, each name once.
fn check_headers(
    t: &HttpTarget,
    given: std::collections::BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, PolicyError> {
    let mut headers = Vec::with_capacity(given.len());
    for (name, value) in given {
        let lower = name.to_ascii_lowercase();
        if !is_header_token(&lower) {
            return Err(PolicyError::invalid(
                "headers",
                format!("{name:?} is not a valid header name"),
                "use token characters only",
            ));
        }
        let injected =
            matches!(&t.auth, HttpAuth::Header { name: n, .. } if n.eq_ignore_ascii_case(&lower));
        if AUTHORITY_HEADERS.contains(&lower.as_str())
            || FRAMING_HEADERS.contains(&lower.as_str())
            || injected
        {
            return Err(PolicyError::invalid(
                "headers",
                format!("the {name} header is set by the vault, never by the caller"),
                format!("remove {name} from headers; the credential is injected for you"),
            ));
        }
        no_controls("headers", "a header value", &value)?;
        if is_rewriting_header(&lower) && !t.allow_headers.contains(&lower) {
            return Err(PolicyError::denied(
                format!("the {name} header makes servers or proxies treat the request as another method or path"),
                format!("remove {name}; send the method and URL you mean. If the target needs it, ask the person to run `vault edit NAME --allow-header {name}`"),
            ));
        }
        if headers.iter().any(|(k, _): &(String, String)| *k == lower) {
            // Two spellings of one name would both be sent, and the stored request could not be
            // rebuilt as one map at dispatch (found by fuzz/tool_args).
            return Err(PolicyError::invalid(
                "headers",
                format!("the header {lower} is given more than once (names ignore case)"),
                "give each header once",
            ));
        }
        headers.push((lower, value));
    }
    headers.sort();
    Ok(headers)
}

/// The body: text or JSON (which sets a content type unless one was given), within the bound.
fn body_of(
    body: Option<String>,
    json: Option<serde_json::Value>,
    headers: &mut Vec<(String, String)>,
) -> Result<Option<Vec<u8>>, PolicyError> {
    let body = match (body, json) {
        (Some(_), Some(_)) => {
            return Err(PolicyError::invalid(
                "body",
                "both body and json were given",
                "send either body (text) or json (a JSON value), not both",
            ))
        }
        (Some(b), None) => Some(b.into_bytes()),
        (None, Some(j)) => {
            if !headers.iter().any(|(k, _)| k == "content-type") {
                headers.push(("content-type".into(), "application/json".into()));
                headers.sort();
            }
            Some(serde_json::to_vec(&j).expect("JSON"))
        }
        (None, None) => None,
    };
    match body {
        Some(b) => within_bound(b, MAX_BODY_BYTES),
        None => Ok(None),
    }
}

/// `body`, if it is within the bound `max`.
fn within_bound(body: Vec<u8>, max: usize) -> Result<Option<Vec<u8>>, PolicyError> {
    if body.len() > max {
        return Err(PolicyError::invalid(
            "body",
            format!("the body is larger than {max} bytes"),
            "send a smaller body",
        ));
    }
    Ok(Some(body))
}

/// Parses and normalizes `raw`, then checks it against the credential's binding.
pub(super) fn bind_url(t: &HttpTarget, raw: &str) -> Result<Url, PolicyError> {
    let fix_url = format!(
        "use a URL under {}://{}:{}{}",
        t.scheme,
        bracket(&t.host),
        t.port,
        t.path_prefix
    );
    let mut url = parse_url(raw, &fix_url)?;
    check_origin(&url, t, &fix_url)?;
    // Send (and show the approver) the address the credential names: `[::ffff:127.0.0.1]` is
    // 127.0.0.1, and the network guard only lets the credential's own literal through.
    if let Some(Host::Ipv6(v6)) = url.host() {
        if let Some(v4) = v6.to_ipv4_mapped() {
            url.set_ip_host(IpAddr::V4(v4))
                .expect("an http(s) URL takes an IP host");
        }
    }
    check_path(&url, raw, t, fix_url)?;
    Ok(url)
}

/// An absolute URL without user info or a fragment.
fn parse_url(raw: &str, fix_url: &str) -> Result<Url, PolicyError> {
    let url = Url::parse(raw.trim()).map_err(|e| {
        PolicyError::invalid(
            "url",
            format!("{raw:?} is not an absolute URL ({e})"),
            fix_url.to_owned(),
        )
    })?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(PolicyError::invalid(
            "url",
            "user info (user@host) is not allowed in the URL",
            "remove it; the vault injects the credential",
        ));
    }
    if url.fragment().is_some() {
        return Err(PolicyError::invalid(
            "url",
            "the URL has a #fragment",
            "remove the fragment",
        ));
    }
    Ok(url)
}

/// Scheme, host (an IPv4-mapped IPv6 literal compared as its IPv4) and port are the target's.
fn check_origin(url: &Url, t: &HttpTarget, fix_url: &str) -> Result<(), PolicyError> {
    let host = match url.host() {
        Some(Host::Domain(d)) => d.trim_end_matches('.').to_owned(),
        Some(Host::Ipv4(v4)) => v4.to_string(),
        Some(Host::Ipv6(v6)) => v6
            .to_ipv4_mapped()
            .map(|v4| v4.to_string())
            .unwrap_or_else(|| v6.to_string()),
        None => {
            return Err(PolicyError::invalid(
                "url",
                "the URL has no host",
                fix_url.to_owned(),
            ))
        }
    };
    let port = url.port_or_known_default().unwrap_or(0);
    if (url.scheme() != t.scheme || host != t.host || port != t.port)
        && !crate::mutation::off("url_binding")
    {
        return Err(PolicyError::denied(
            format!(
                "{}://{}:{} is not the credential's target {}://{}:{}",
                url.scheme(),
                bracket(&host),
                port,
                t.scheme,
                bracket(&t.host),
                t.port
            ),
            fix_url.to_owned(),
        ));
    }
    Ok(())
}

/// The path: no dot segments, under the prefix both decoded and as parsed, and sent exactly as
/// written (see `policy/path.rs`).
fn check_path(url: &Url, raw: &str, t: &HttpTarget, fix_url: String) -> Result<(), PolicyError> {
    let path = url.path();
    let decoded = percent_decode(path);
    if decoded.split('/').any(|s| s == "." || s == "..") {
        return Err(PolicyError::invalid(
            "url",
            "the path has . or .. segments",
            "write the path without them",
        ));
    }
    if !under_prefix(&decoded, &t.path_prefix) || !under_prefix(path, &t.path_prefix) {
        return Err(PolicyError::denied(
            format!(
                "the path {decoded:?} is outside the credential's prefix {:?}",
                t.path_prefix
            ),
            fix_url,
        ));
    }
    // The path as written must be in the safe alphabet, and the parser must have had nothing to
    // normalise in it: what the person is shown is what is sent.
    let written = path::raw_path(raw.trim())
        .and_then(|p| path::check(p).map(|()| p))
        .map_err(|(reason, fix)| PolicyError::invalid("url", reason, fix))?;
    if path != written && !(written.is_empty() && path == "/") {
        return Err(PolicyError::invalid(
            "url",
            format!("the path {written:?} would be sent as {path:?}"),
            "write the path exactly as it should be sent",
        ));
    }
    Ok(())
}

/// Agent text that reaches a person's terminal (the card, `vault pending`) must hold no control
/// character (C0, DEL, C1: line breaks and escape sequences) and no format character (bidi
/// overrides and isolates, zero-width characters), which could repaint or reorder what is shown.
fn no_controls(field: &'static str, what: &str, s: &str) -> Result<(), PolicyError> {
    match s.chars().find(|&c| crate::term::needs_escape(c)) {
        None => Ok(()),
        Some(c) => Err(PolicyError::invalid(
            field,
            format!(
                "{what} contains the control or format character U+{:04X}",
                c as u32
            ),
            "remove control characters (line breaks, tabs, ESC) and bidi or zero-width characters; percent-encode what the target needs",
        )),
    }
}

fn bracket(host: &str) -> String {
    if host.parse::<IpAddr>().is_ok_and(|ip| ip.is_ipv6()) {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// `/v1/` covers `/v1/x`; `/v1` covers `/v1` and `/v1/x` but not `/v1admin`.
pub(super) fn under_prefix(path: &str, prefix: &str) -> bool {
    if prefix == "/" || path == prefix {
        return true;
    }
    if prefix.ends_with('/') {
        return path.starts_with(prefix);
    }
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.starts_with('/'))
}
