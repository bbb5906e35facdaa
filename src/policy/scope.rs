//! What a session grant covers (docs/design.md §4): `grant_scope`, the one pure function from a
//! normalized action to its `GrantScope`, which the approver shows on the card before `s` is
//! pressed and signs, and the agent recomputes when it records the grant; and `covers`, whether
//! a scope covers an action, which the agent asks at submission (`gate`) and at dispatch
//! (`check`). A grant given on a read covers reads (GET and HEAD with no body, no rewriting
//! header and no `_method`) under the directory of the read's path; one given on anything else
//! covers exactly that method on exactly that path, or exactly that SSH command. What counts as
//! a read (`reads_only`) is also what the `writes` policy runs without a card and what is never
//! replayed.
use crate::credentials::http::{is_rewriting_header, METHOD_PARAM};
use crate::wire::{GrantScope, NormalizedAction, NormalizedHttp};

/// The methods a grant given on a read covers.
pub const READ_METHODS: [&str; 2] = ["GET", "HEAD"];

/// Whether an HTTP request only reads: GET or HEAD, with no body, no request-rewriting header
/// and no `_method` query parameter (a URL that does not parse counts as a write).
pub fn reads_only(method: &str, url: &str, headers: &[(String, String)], has_body: bool) -> bool {
    let rewrites_method = url::Url::parse(url).map_or(true, |u| {
        u.query_pairs()
            .any(|(k, _)| k.eq_ignore_ascii_case(METHOD_PARAM))
    });
    READ_METHODS.contains(&method)
        && !has_body
        && !rewrites_method
        && !headers.iter().any(|(k, _)| is_rewriting_header(k))
}

/// Whether a normalized action only reads (`reads_only`); an SSH command never does.
pub fn is_read(a: &NormalizedAction) -> bool {
    match a {
        NormalizedAction::Http(h) => http_reads(h),
        NormalizedAction::Ssh(_) | NormalizedAction::Network(_) => false,
    }
}

fn http_reads(h: &NormalizedHttp) -> bool {
    reads_only(&h.method, &h.url, &h.headers, h.body_blake3.is_some())
}

/// The URL's path exactly as it will be sent, if the URL parses.
fn path_of(url: &str) -> Option<String> {
    url::Url::parse(url).ok().map(|u| u.path().to_owned())
}

/// The rewriting headers (`name: value`) and `_method` parameters (`_method=value`) of a
/// request, sorted: what can make a server treat it as another method or path.
fn rewrites_of(h: &NormalizedHttp) -> Vec<String> {
    let mut out: Vec<String> = h
        .headers
        .iter()
        .filter(|(k, _)| is_rewriting_header(k))
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    if let Ok(u) = url::Url::parse(&h.url) {
        out.extend(
            u.query_pairs()
                .filter(|(k, _)| k.eq_ignore_ascii_case(METHOD_PARAM))
                .map(|(_, v)| format!("{METHOD_PARAM}={v}")),
        );
    }
    out.sort();
    out
}

/// What `s` on this action's card grants (besides the session, credential version and expiry):
/// for a read, GET and HEAD under the directory of its path (`/repos/acme/app/issues` →
/// `/repos/acme/app/`); for any other HTTP request, exactly its method on exactly its path (with
/// exactly its rewriting headers and `_method`, usually none); for SSH, exactly its command.
pub fn grant_scope(a: &NormalizedAction) -> GrantScope {
    match a {
        NormalizedAction::Http(h) => {
            // A normalized URL always parses; one that does not gets a scope nothing matches.
            let path = path_of(&h.url).unwrap_or_else(|| h.url.clone());
            if http_reads(h) {
                // The path's directory; for a path at the host's root (`GET /user`), the path
                // itself and what lies under it, never every read on the host.
                let dir = path.rfind('/').map_or("/", |i| &path[..=i]);
                let prefix = if dir == "/" && path.len() > 1 {
                    format!("{}/", path.trim_end_matches('/'))
                } else {
                    dir.to_owned()
                };
                GrantScope::HttpReads {
                    methods: READ_METHODS.map(str::to_owned).to_vec(),
                    prefix,
                }
            } else {
                GrantScope::HttpWrite {
                    method: h.method.clone(),
                    path,
                    rewrites: rewrites_of(h),
                }
            }
        }
        NormalizedAction::Ssh(s) => GrantScope::SshCommand {
            command: s.command.clone(),
        },
        NormalizedAction::Network(n) => GrantScope::Network {
            host: n.host.clone(),
            port: n.port,
        },
    }
}

/// Whether `scope` covers the action (its session, credential version and expiry are the
/// caller's to check): a reads scope only reads under its prefix (and of the prefix's own path,
/// `/repos/acme/app` for `/repos/acme/app/`), a write scope only its method
/// on its path with the same rewriting headers, an SSH scope only its command.
pub fn covers(scope: &GrantScope, a: &NormalizedAction) -> bool {
    if crate::mutation::off("grant_scope") {
        return true;
    }
    match (scope, a) {
        (GrantScope::HttpReads { methods, prefix }, NormalizedAction::Http(h)) => {
            prefix.ends_with('/')
                && methods.iter().all(|m| READ_METHODS.contains(&m.as_str()))
                && methods.contains(&h.method)
                && http_reads(h)
                && path_of(&h.url).is_some_and(|p| {
                    p.starts_with(prefix.as_str())
                        || (prefix.len() > 1 && p == prefix.trim_end_matches('/'))
                })
        }
        (
            GrantScope::HttpWrite {
                method,
                path,
                rewrites,
            },
            NormalizedAction::Http(h),
        ) => {
            *method == h.method
                && path_of(&h.url).as_ref() == Some(path)
                && rewrites_of(h) == *rewrites
        }
        (GrantScope::SshCommand { command }, NormalizedAction::Ssh(s)) => *command == s.command,
        (GrantScope::Network { host, port }, NormalizedAction::Network(n)) => {
            *host == n.host && *port == n.port
        }
        _ => false,
    }
}

/// The scope as a person reads it, on one line (agent-derived text: escape it for a terminal):
/// `GET, HEAD at or under /repos/acme/app, any query`.
pub fn describe(scope: &GrantScope) -> String {
    match scope {
        GrantScope::HttpReads { methods, prefix } if prefix.len() > 1 => format!(
            "{} at or under {}, any query",
            methods.join(", "),
            prefix.trim_end_matches('/')
        ),
        GrantScope::HttpReads { methods, .. } => {
            format!("{} anywhere on the host, any query", methods.join(", "))
        }
        GrantScope::HttpWrite {
            method,
            path,
            rewrites,
        } => {
            let with = if rewrites.is_empty() {
                String::new()
            } else {
                format!(", with {}", rewrites.join(", "))
            };
            format!("{method} on exactly {path} (any query and body{with})")
        }
        GrantScope::SshCommand { command } => format!("exactly the command {command}"),
        GrantScope::Network { host, port } => {
            format!("connections to exactly {}", authority(host, *port))
        }
    }
}

/// `host:port`, an IPv6 address in brackets: how a network action's host reads on a card, in a
/// summary and in the journal.
pub fn authority(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn http(method: &str, url: &str, headers: &[(&str, &str)], body: bool) -> NormalizedAction {
        serde_json::from_value(json!({"kind": "http", "method": method, "url": url,
            "headers": headers, "body_blake3": body.then_some("00"),
            "credential": {"id": "cred_1", "version": 1, "name": "api", "profile": "default"},
            "timeout_s": 30, "max_output_bytes": 65536}))
        .unwrap()
    }

    fn ssh(command: &str) -> NormalizedAction {
        serde_json::from_value(json!({"kind": "ssh", "host": "h", "port": 22, "user": "u",
            "host_key": "SHA256:k", "command": command, "timeout_s": 30, "max_output_bytes": 1,
            "credential": {"id": "cred_1", "version": 1, "name": "web", "profile": "default"}}))
        .unwrap()
    }

    const B: &str = "https://api.example.com";

    #[test]
    fn a_read_at_the_hosts_root_grants_that_path_and_under_it_never_every_read() {
        let scope = grant_scope(&http("GET", &format!("{B}/user"), &[], false));
        assert_eq!(describe(&scope), "GET, HEAD at or under /user, any query");
        for (url, covered) in [
            ("/user", true),
            ("/user?x=1", true),
            ("/user/repos", true),
            ("/users/octocat", false),
            ("/repos/acme/app", false),
            ("/", false),
        ] {
            let a = http("GET", &format!("{B}{url}"), &[], false);
            assert_eq!(covers(&scope, &a), covered, "{url}");
        }
        // A grant given on the host's root itself still says what it is.
        let root = grant_scope(&http("GET", &format!("{B}/"), &[], false));
        assert!(
            describe(&root).contains("anywhere on the host"),
            "{}",
            describe(&root)
        );
    }

    #[test]
    fn a_read_grants_reads_under_its_directory_and_nothing_else() {
        let granted = http(
            "GET",
            &format!("{B}/repos/acme/app/issues?page=2"),
            &[],
            false,
        );
        let scope = grant_scope(&granted);
        assert_eq!(
            describe(&scope),
            "GET, HEAD at or under /repos/acme/app, any query"
        );
        let yes = [
            http("GET", &format!("{B}/repos/acme/app/issues"), &[], false),
            http(
                "HEAD",
                &format!("{B}/repos/acme/app/pulls?state=open"),
                &[],
                false,
            ),
            http(
                "GET",
                &format!("{B}/repos/acme/app/issues/7/comments"),
                &[],
                false,
            ),
            http(
                "GET",
                &format!("{B}/repos/acme/app/"),
                &[("accept", "x")],
                false,
            ),
        ];
        for a in &yes {
            assert!(covers(&scope, a), "{a:?}");
        }
        let no = [
            http("DELETE", &format!("{B}/repos/acme/prod"), &[], false),
            http("DELETE", &format!("{B}/repos/acme/app/issues"), &[], false),
            http("POST", &format!("{B}/repos/acme/app/issues"), &[], true),
            http("PUT", &format!("{B}/repos/acme/app/issues"), &[], true),
            http("PATCH", &format!("{B}/repos/acme/app/issues"), &[], true),
            http("OPTIONS", &format!("{B}/repos/acme/app/issues"), &[], false),
            http("GET", &format!("{B}/repos/acme/app/issues"), &[], true),
            http("GET", &format!("{B}/repos/acme/application"), &[], false),
            http("GET", &format!("{B}/repos/acme/other/issues"), &[], false),
            http(
                "GET",
                &format!("{B}/repos/acme/app/x?_method=DELETE"),
                &[],
                false,
            ),
            http(
                "GET",
                &format!("{B}/repos/acme/app/x?_METHOD=DELETE"),
                &[],
                false,
            ),
            http(
                "GET",
                &format!("{B}/repos/acme/app/x"),
                &[("x-http-method-override", "DELETE")],
                false,
            ),
            ssh("ls"),
        ];
        // The directory's own path is covered too (the card says so).
        assert!(covers(
            &scope,
            &http("GET", &format!("{B}/repos/acme/app"), &[], false)
        ));
        for a in &no {
            assert!(!covers(&scope, a), "{a:?}");
        }
        // The root's directory is the root.
        let root = grant_scope(&http("GET", &format!("{B}/"), &[], false));
        assert!(covers(
            &root,
            &http("HEAD", &format!("{B}/a/b"), &[], false)
        ));
        // A scope whose methods name a write, or whose prefix is no directory, covers nothing.
        let forged = GrantScope::HttpReads {
            methods: vec!["GET".into(), "DELETE".into()],
            prefix: "/".into(),
        };
        assert!(!covers(
            &forged,
            &http("GET", &format!("{B}/a"), &[], false)
        ));
        let forged = GrantScope::HttpReads {
            methods: vec!["GET".into()],
            prefix: "/repos/acme/app".into(),
        };
        assert!(!covers(
            &forged,
            &http("GET", &format!("{B}/repos/acme/app/x"), &[], false)
        ));
    }

    #[test]
    fn a_write_grants_exactly_its_method_and_path_and_ssh_exactly_its_command() {
        let scope = grant_scope(&http("POST", &format!("{B}/v1/items?x=1"), &[], true));
        assert_eq!(
            describe(&scope),
            "POST on exactly /v1/items (any query and body)"
        );
        assert!(covers(
            &scope,
            &http("POST", &format!("{B}/v1/items"), &[], true)
        ));
        assert!(covers(
            &scope,
            &http(
                "POST",
                &format!("{B}/v1/items?y=2"),
                &[("accept", "j")],
                false
            )
        ));
        for a in [
            http("DELETE", &format!("{B}/v1/items"), &[], false),
            http("PUT", &format!("{B}/v1/items"), &[], true),
            http("GET", &format!("{B}/v1/items"), &[], false),
            http("POST", &format!("{B}/v1/items/1"), &[], true),
            http("POST", &format!("{B}/v1/"), &[], true),
            http("POST", &format!("{B}/v1/items?_method=DELETE"), &[], true),
            http(
                "POST",
                &format!("{B}/v1/items"),
                &[("x-http-method-override", "DELETE")],
                true,
            ),
        ] {
            assert!(!covers(&scope, &a), "{a:?}");
        }
        // A GET with a body is a write: its grant is that method on that path only.
        let scope = grant_scope(&http("GET", &format!("{B}/search/q"), &[], true));
        assert!(matches!(&scope, GrantScope::HttpWrite { path, .. } if path == "/search/q"));
        assert!(!covers(
            &scope,
            &http("GET", &format!("{B}/search/other"), &[], false)
        ));
        // A grant on a request that rewrites its method covers only the same rewrite.
        let over = http(
            "POST",
            &format!("{B}/v1/items"),
            &[("x-http-method-override", "PATCH")],
            true,
        );
        let scope = grant_scope(&over);
        assert!(describe(&scope).contains("with x-http-method-override: PATCH"));
        assert!(covers(&scope, &over));
        assert!(!covers(
            &scope,
            &http("POST", &format!("{B}/v1/items"), &[], true)
        ));
        // SSH: the command exactly.
        let scope = grant_scope(&ssh("'git' 'pull'"));
        assert_eq!(describe(&scope), "exactly the command 'git' 'pull'");
        assert!(covers(&scope, &ssh("'git' 'pull'")));
        for a in [
            ssh("'git' 'push'"),
            ssh("'git' 'pull' '--all'"),
            ssh("git pull"),
        ] {
            assert!(!covers(&scope, &a), "{a:?}");
        }
        assert!(!covers(&scope, &http("GET", &format!("{B}/"), &[], false)));
    }

    #[test]
    fn the_scope_reads_back_as_signed() {
        for scope in [
            grant_scope(&http("GET", &format!("{B}/a/b"), &[], false)),
            grant_scope(&http("DELETE", &format!("{B}/a/b"), &[], false)),
            grant_scope(&ssh("uptime")),
        ] {
            let text = crate::canonical::to_string(&serde_json::to_value(&scope).unwrap());
            assert_eq!(serde_json::from_str::<GrantScope>(&text).unwrap(), scope);
        }
        let text = r#"{"kind":"http_reads","methods":["GET","HEAD"],"prefix":"/a/"}"#;
        assert!(serde_json::from_str::<GrantScope>(text).is_ok());
        let extra = text.replace(r#""prefix""#, r#""more":1,"prefix""#);
        assert!(serde_json::from_str::<GrantScope>(&extra).is_err());
    }
}
