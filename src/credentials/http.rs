//! HTTP credentials: the exact scheme + host + port (+ path prefix, methods) a secret may reach,
//! and how it is injected (bearer, basic, header template, query parameter).
use super::{invalid, CredentialError};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Methods a credential may be limited to.
pub(crate) const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

pub use crate::wire::HttpTarget;

/// Headers that make a server or proxy treat a request as another method or another path
/// (Rails, Laravel, Spring, Symfony, IIS URL Rewrite, reverse proxies). Refused unless the
/// credential allows them by name; `x-forwarded-*` counts as one of them too.
pub(crate) const REWRITING_HEADERS: &[&str] = &[
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
    "x-original-url",
    "x-rewrite-url",
    "x-original-method",
    "forwarded",
];

/// The query parameter that frameworks read as the request's method (`?_method=DELETE`).
pub const METHOD_PARAM: &str = "_method";

/// Whether a (lowercase) header name rewrites the method or the path.
pub fn is_rewriting_header(lower: &str) -> bool {
    REWRITING_HEADERS.contains(&lower) || lower.starts_with("x-forwarded-")
}

/// `--allow-header NAME`: a rewriting header (or `_method`), lowercased. Any other header needs
/// no allowing, and the ones the vault sets can never be allowed.
pub fn check_allow_header(name: &str) -> Result<String, CredentialError> {
    let lower = name.trim().to_ascii_lowercase();
    if lower == METHOD_PARAM || (is_header_token(&lower) && is_rewriting_header(&lower)) {
        Ok(lower)
    } else {
        Err(invalid(
            "--allow-header",
            format!(
                "{name:?} is not a request-rewriting header; only {}, x-forwarded-* and the {METHOD_PARAM} query parameter need allowing",
                REWRITING_HEADERS.join(", ")
            ),
        ))
    }
}

/// Headers only the HTTP layer sets (routing and framing): neither a credential nor an agent may.
pub(crate) const FRAMING_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "te",
    "upgrade",
    "expect",
];

/// Whether `name` is an RFC 9110 token, i.e. a valid header name.
pub(crate) fn is_header_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c))
}

pub use crate::wire::HttpAuth;

impl HttpAuth {
    pub fn summary(&self) -> String {
        match self {
            HttpAuth::Bearer => "bearer".into(),
            HttpAuth::Basic { username } => format!("basic {username}"),
            HttpAuth::Header { name, .. } => format!("header {name}"),
            HttpAuth::Query { param } => format!("query {param}"),
        }
    }

    /// Validates names and templates.
    pub fn check(&self) -> Result<(), CredentialError> {
        match self {
            HttpAuth::Bearer => Ok(()),
            HttpAuth::Basic { username } => {
                if username.is_empty()
                    || username.contains(':')
                    || username.chars().any(char::is_control)
                {
                    Err(invalid(
                        "--basic",
                        "the user name must be non-empty, without ':' or control characters",
                    ))
                } else {
                    Ok(())
                }
            }
            HttpAuth::Header { name, format } => {
                if !is_header_token(name) {
                    return Err(invalid(
                        "--header",
                        format!("{name:?} is not a valid header name"),
                    ));
                }
                if FRAMING_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
                    return Err(invalid(
                        "--header",
                        format!("{name} is set by the vault itself, not by a credential"),
                    ));
                }
                if format.matches("{secret}").count() != 1 {
                    return Err(invalid(
                        "--format",
                        "it must contain {secret} exactly once, e.g. 'Token {secret}'",
                    ));
                }
                if format.chars().any(char::is_control) {
                    return Err(invalid(
                        "--format",
                        "it must not contain control characters",
                    ));
                }
                Ok(())
            }
            HttpAuth::Query { param } => {
                let ok = !param.is_empty()
                    && param
                        .bytes()
                        .all(|c| c.is_ascii_alphanumeric() || b"._~-".contains(&c));
                if ok {
                    Ok(())
                } else {
                    Err(invalid(
                        "--query",
                        format!("{param:?} must be letters, digits, '.', '_', '~' or '-'"),
                    ))
                }
            }
        }
    }
}

impl HttpTarget {
    pub fn summary(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let methods = match &self.methods {
            Some(m) => format!(" {}", m.join(",")),
            None => String::new(),
        };
        let allows = if self.allow_headers.is_empty() {
            String::new()
        } else {
            format!(" allows {}", self.allow_headers.join(","))
        };
        let from = match &self.secret_from {
            Some(r) => format!(", secret from {r}"),
            None => String::new(),
        };
        format!(
            "{}://{}:{}{} ({}{}){}{}",
            self.scheme,
            host,
            self.port,
            self.path_prefix,
            self.auth.summary(),
            from,
            methods,
            allows
        )
    }
}

/// Parses `--host`: `host`, `host:port`, `[v6]:port`, or with `https://` / `http://` in front.
/// Returns (scheme, host, port). Plain http is only for loopback targets, and a loopback target
/// must say its scheme (its server may speak either).
pub fn parse_host(
    input: &str,
    default_scheme: &str,
) -> Result<(String, String, u16), CredentialError> {
    let raw = input.trim();
    let lower = raw.to_ascii_lowercase();
    let (scheme, rest) = if let Some(r) = lower.strip_prefix("https://") {
        ("https", r)
    } else if let Some(r) = lower.strip_prefix("http://") {
        ("http", r)
    } else if lower.contains("://") {
        return Err(invalid(
            "--host",
            "only https:// (or http:// for loopback) is supported",
        ));
    } else {
        (default_scheme, lower.as_str())
    };
    let explicit = lower.contains("://");
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains('@') {
        return Err(invalid(
            "--host",
            "user info (user@host) is not allowed; the secret is injected by the vault",
        ));
    }
    if rest.contains(['/', '?', '#']) {
        return Err(invalid(
            "--host",
            "give only host[:port]; put a path in --path-prefix",
        ));
    }
    if rest.is_empty() || rest.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid("--host", format!("{raw:?} is not a host name")));
    }
    let (host, port) = split_port(rest)?;
    let host = normalize_host(host)?;
    let port = match port {
        Some(p) => p,
        None if scheme == "http" => 80,
        None => 443,
    };
    if !explicit && is_loopback(&host) {
        // A loopback server usually speaks plain HTTP; guessing either way fails half the time,
        // 29 s later, at the first approved call. Ask once, now.
        return Err(invalid(
            "--host",
            format!("{raw} is a loopback address: say which protocol its server speaks, http://{rest} or https://{rest}"),
        ));
    }
    if scheme == "http" && !is_loopback(&host) {
        return Err(invalid(
            "--host",
            "plain http is only allowed for loopback (127.0.0.1, ::1, localhost); use https://",
        ));
    }
    Ok((scheme.to_owned(), host, port))
}

/// `vault edit --host` of an SSH credential: `host`, `host:port` or `[v6]:port`, normalized as
/// `vault add ssh --host` is.
pub(crate) fn split_ssh_host(input: &str) -> Result<(String, Option<u16>), CredentialError> {
    let raw = input.trim();
    if raw.contains("://") || raw.contains(['@', '/']) {
        return Err(invalid(
            "--host",
            "give an SSH host as host or host:port (the user stays as it is)",
        ));
    }
    let (host, port) = split_port(raw)?;
    Ok((normalize_host(host)?, port))
}

fn split_port(s: &str) -> Result<(&str, Option<u16>), CredentialError> {
    let (host, port) = if let Some(inner) = s.strip_prefix('[') {
        let (h, after) = inner
            .split_once(']')
            .ok_or_else(|| invalid("--host", "missing ']' after an IPv6 address"))?;
        match after {
            "" => (h, None),
            p => (
                h,
                Some(
                    p.strip_prefix(':')
                        .ok_or_else(|| invalid("--host", "expected :port after ']'"))?,
                ),
            ),
        }
    } else if s.matches(':').count() == 1 {
        let (h, p) = s.split_once(':').unwrap_or((s, ""));
        (h, Some(p))
    } else {
        (s, None)
    };
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Some(n),
            _ => return Err(invalid("--host", format!("port {p:?} must be 1-65535"))),
        },
    };
    Ok((host, port))
}

/// Lowercase DNS name, dotted-decimal IPv4, or canonical IPv6. Ambiguous numeric encodings
/// (`2130706433`, `0x7f.1`, `127.1`) are refused so the binding is exactly what a person reads.
pub fn normalize_host(host: &str) -> Result<String, CredentialError> {
    let host = host.to_ascii_lowercase();
    if let Ok(v4) = host.parse::<Ipv4Addr>() {
        return Ok(v4.to_string());
    }
    if let Ok(v6) = host.parse::<Ipv6Addr>() {
        return Ok(match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        });
    }
    let host = host.strip_suffix('.').unwrap_or(&host);
    let labels: Vec<&str> = host.split('.').collect();
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
    };
    if host.len() > 253 || !labels.iter().all(label_ok) {
        return Err(invalid(
            "--host",
            format!("{host:?} is not a valid host name"),
        ));
    }
    let last = labels[labels.len() - 1];
    if last.bytes().all(|c| c.is_ascii_digit()) || last.starts_with("0x") {
        return Err(invalid("--host", format!("{host:?} looks like an IP address in an unusual encoding; write it in dotted decimal")));
    }
    Ok(host.to_owned())
}

/// Loopback names and addresses (127.0.0.0/8, ::1, localhost).
pub fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host.ends_with(".localhost")
        || host
            .parse::<IpAddr>()
            .map(|ip| ip.is_loopback())
            .unwrap_or(false)
}

/// `--path-prefix`: absolute, no dot segments, no query, fragment, percent sign or control chars.
pub fn check_path_prefix(p: &str) -> Result<String, CredentialError> {
    if !p.starts_with('/') {
        return Err(invalid("--path-prefix", "it must start with '/'"));
    }
    if p.contains(['?', '#', '%', '\\']) || p.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(invalid(
            "--path-prefix",
            "it must be a plain path: no ?, #, %, \\ or spaces",
        ));
    }
    if p.split('/').any(|seg| seg == "." || seg == "..") {
        return Err(invalid(
            "--path-prefix",
            "it must not contain . or .. segments",
        ));
    }
    Ok(p.to_owned())
}

/// `--methods GET,POST`: known methods, uppercased, deduplicated, in a stable order.
pub fn parse_methods(list: &str) -> Result<Vec<String>, CredentialError> {
    let mut out: Vec<String> = Vec::new();
    for m in list
        .split(',')
        .map(|m| m.trim().to_ascii_uppercase())
        .filter(|m| !m.is_empty())
    {
        if !METHODS.contains(&m.as_str()) {
            return Err(invalid(
                "--methods",
                format!("{m} is not one of {}", METHODS.join(",")),
            ));
        }
        if !out.contains(&m) {
            out.push(m);
        }
    }
    if out.is_empty() {
        return Err(invalid(
            "--methods",
            "give at least one method, e.g. GET,POST",
        ));
    }
    out.sort_by_key(|m| METHODS.iter().position(|k| k == m));
    Ok(out)
}
