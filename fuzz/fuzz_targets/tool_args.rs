//! Fuzzes tool-argument validation: arbitrary bytes as the `arguments` of `http_request` and
//! `ssh_exec`, through the same parse (JSON object → `HttpArgs` / `SshArgs`, unknown fields
//! refused) and `policy::validate_http` / `validate_ssh` that `vault mcp` runs, against four
//! credentials (a bearer under `/v1/` on a name, a query credential on a loopback address under
//! `writes` that allows `_method` and one override header, a header template on an IPv6 address
//! with a method list under `never`, an SSH login).
//!
//! Input: byte 0 picks the credential; the rest is the JSON text.
//!
//! Invariants: no panic; an accepted request's URL is on the credential's scheme, host and port,
//! its path is under the prefix and in the safe alphabet (no `;`, `\`, `%25`, `%2e`, `%2f`,
//! non-ASCII, dot or empty segments), with no control or format character anywhere; its headers
//! are lowercase tokens, never the vault's own (authority, framing, the injected one), and a
//! rewriting header or `_method` only when the credential allows it; the body is within
//! `MAX_BODY_BYTES` and, when a card may be needed, shows within `MAX_SHOWN_BODY_BYTES`; the
//! method is allowed; and the stored form re-validates at dispatch to the same normalized action
//! and hash (as `approvals::dispatch` rebuilds it).
#![no_main]

use agent_vault::credentials::{
    is_rewriting_header, Approval, Credential, HttpAuth, HttpTarget, SshAuth, SshTarget, Target,
    METHOD_PARAM,
};
use agent_vault::policy::{self, action_hash, HttpArgs, SshArgs, ValidatedRequest};
use agent_vault::term::{needs_escape, show_body, MAX_SHOWN_BODY_BYTES};
use agent_vault::wire::touch::Presence;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::sync::OnceLock;

fn http(
    name: &str,
    scheme: &str,
    host: &str,
    port: u16,
    prefix: &str,
    methods: Option<&[&str]>,
    auth: HttpAuth,
    approval: Approval,
    allow: &[&str],
) -> Credential {
    Credential {
        id: format!("cred_{name}"),
        profile: "default".into(),
        name: name.into(),
        version: 1,
        approval,
        target: Target::Http(HttpTarget {
            scheme: scheme.into(),
            host: host.into(),
            port,
            path_prefix: prefix.into(),
            methods: methods.map(|m| m.iter().map(|s| s.to_string()).collect()),
            auth,
            ca_file: None,
            allow_headers: allow.iter().map(|s| s.to_string()).collect(),
            secret_from: None,
            presence: Presence::None,
        }),
        created_at: String::new(),
        updated_at: String::new(),
    }
}

fn creds() -> &'static [Credential] {
    static C: OnceLock<Vec<Credential>> = OnceLock::new();
    C.get_or_init(|| {
        vec![
            http(
                "api",
                "https",
                "api.example.com",
                443,
                "/v1/",
                None,
                HttpAuth::Bearer,
                Approval::Each,
                &[],
            ),
            http(
                "q",
                "http",
                "127.0.0.1",
                8080,
                "/",
                None,
                HttpAuth::Query {
                    param: "key".into(),
                },
                Approval::Writes,
                &["_method", "x-http-method-override"],
            ),
            http(
                "hdr",
                "https",
                "2001:db8::1",
                8443,
                "/api",
                Some(&["GET", "POST"]),
                HttpAuth::Header {
                    name: "X-Key".into(),
                    format: "T {secret}".into(),
                },
                Approval::Never,
                &[],
            ),
            Credential {
                target: Target::Ssh(SshTarget {
                    host: "10.0.0.5".into(),
                    port: 22,
                    user: "deploy".into(),
                    host_key: format!("SHA256:{}", "a".repeat(43)),
                    auth: SshAuth::Password,
                    allow_commands: vec!["systemctl status *".into(), "uptime".into()],
                    presence: Presence::None,
                }),
                ..http(
                    "ssh",
                    "https",
                    "x",
                    1,
                    "/",
                    None,
                    HttpAuth::Bearer,
                    Approval::Each,
                    &[],
                )
            },
        ]
    })
}

const VAULT_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "te",
    "upgrade",
    "expect",
];

fn under_prefix(path: &str, prefix: &str) -> bool {
    prefix == "/"
        || path == prefix
        || if prefix.ends_with('/') {
            path.starts_with(prefix)
        } else {
            path.strip_prefix(prefix)
                .is_some_and(|r| r.starts_with('/'))
        }
}

fn check_http(cred: &Credential, h: &policy::HttpRequest) {
    let Target::Http(t) = &cred.target else {
        unreachable!()
    };
    assert!(
        !h.url.chars().any(needs_escape),
        "control/format char in {:?}",
        h.url
    );
    let u = url::Url::parse(&h.url).expect("an accepted URL parses");
    assert_eq!(u.scheme(), t.scheme);
    let host = u
        .host_str()
        .unwrap()
        .trim_start_matches('[')
        .trim_end_matches(']');
    assert_eq!(host.trim_end_matches('.'), t.host, "{}", h.url);
    assert_eq!(u.port_or_known_default(), Some(t.port));
    assert!(u.username().is_empty() && u.password().is_none() && u.fragment().is_none());
    let path = u.path();
    assert!(
        under_prefix(path, &t.path_prefix),
        "{path} outside {}",
        t.path_prefix
    );
    let lower = path.to_ascii_lowercase();
    for bad in [";", "\\", "%25", "%2e", "%2f", "%5c", "%00", "//"] {
        assert!(!lower.contains(bad), "{bad} in accepted path {path}");
    }
    assert!(path.is_ascii());
    assert!(!path.split('/').any(|s| s == "." || s == ".."), "{path}");
    if let Some(m) = &t.methods {
        assert!(m.contains(&h.method));
    }
    let injected = match &t.auth {
        HttpAuth::Header { name, .. } => Some(name.to_ascii_lowercase()),
        _ => None,
    };
    for (k, v) in &h.headers {
        assert_eq!(k, &k.to_ascii_lowercase());
        assert!(
            !VAULT_HEADERS.contains(&k.as_str()) && Some(k) != injected.as_ref(),
            "{k}"
        );
        assert!(
            !is_rewriting_header(k) || t.allow_headers.contains(k),
            "{k}"
        );
        assert!(!v.chars().any(needs_escape), "control char in header {k}");
    }
    if let HttpAuth::Query { param } = &t.auth {
        assert!(!u.query_pairs().any(|(k, _)| k == param.as_str()));
    }
    if u.query_pairs()
        .any(|(k, _)| k.eq_ignore_ascii_case(METHOD_PARAM))
    {
        assert!(t.allow_headers.iter().any(|a| a == METHOD_PARAM));
    }
    if let Some(b) = &h.body {
        assert!(b.len() <= policy::MAX_BODY_BYTES);
        let may_need_card = match cred.approval {
            Approval::Each | Approval::Session => true,
            Approval::Writes => !h.is_read_only(),
            Approval::Never => false,
        };
        if may_need_card {
            assert!(show_body(b).len() <= MAX_SHOWN_BODY_BYTES);
        }
    }
}

/// What dispatch does: rebuild the arguments from the stored action and validate them again.
fn revalidate(cred: &Credential, r: &ValidatedRequest) {
    let n = r.normalized(cred);
    let ValidatedRequest::Http(h) = r else { return };
    let args = HttpArgs {
        credential: cred.name.clone(),
        method: h.method.clone(),
        url: h.url.clone(),
        headers: h.headers.iter().cloned().collect(),
        body: h
            .body
            .as_ref()
            .map(|b| String::from_utf8(b.clone()).expect("bodies are text")),
        timeout_s: Some(h.timeout_s),
        max_output_bytes: Some(h.max_output_bytes),
        ..HttpArgs::default()
    };
    let again = policy::validate_http(cred, args)
        .unwrap_or_else(|e| panic!("the stored request no longer validates: {e} ({})", h.url));
    assert_eq!(again.normalized(cred), n);
    assert_eq!(action_hash(&again.normalized(cred)), action_hash(&n));
    // The stored text reads back as exactly this action and hash.
    let stored = policy::canonical_text(&n);
    assert_eq!(policy::read_normalized(&stored), Some((n.clone(), action_hash(&n))));
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, json)) = data.split_first() else {
        return;
    };
    let Ok(Value::Object(args)) = serde_json::from_slice::<Value>(json) else {
        return;
    };
    let cred = &creds()[pick as usize % creds().len()];
    if let Ok(a) = serde_json::from_value::<HttpArgs>(Value::Object(args.clone())) {
        if let Ok(r) = policy::validate_http(cred, a) {
            let ValidatedRequest::Http(h) = &r else {
                panic!("an HTTP request")
            };
            check_http(cred, h);
            let _ = r.summary(&cred.name);
            revalidate(cred, &r);
        }
    }
    if let Ok(a) = serde_json::from_value::<SshArgs>(Value::Object(args)) {
        if let Ok(ValidatedRequest::Ssh(s)) = policy::validate_ssh(cred, a) {
            assert!(!s.command.trim().is_empty());
            let Target::Ssh(t) = &cred.target else {
                panic!("ssh on an ssh credential")
            };
            assert_eq!(
                (s.host.as_str(), s.port, s.user.as_str()),
                (t.host.as_str(), t.port, t.user.as_str())
            );
        }
    }
});
