//! What a dispatch row's summary says its action was, read back as the agent writes it
//! (`ValidatedRequest::summary`: `METHOD URL (credential NAME…)`, or ``ssh USER@HOST:PORT
//! `COMMAND` (credential NAME)``, or `CONNECT HOST:PORT` for `vault run`'s network), and whether
//! a grant's signed scope covers it: the method class and the path of an HTTP request (a read's
//! `_method` parameter too, from its query), the very command of an SSH one, the very host and
//! port of a network one. Headers and bodies are not in a summary, so a verifier with the
//! key cannot see them; the agent checked the whole request against the scope before it ran.
use crate::wire::GrantScope;

/// An action as its summary says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Said<'a> {
    Http {
        method: &'a str,
        path: &'a str,
        query: &'a str,
    },
    Ssh {
        command: &'a str,
    },
    /// `vault run`'s network: `CONNECT host:port` (an IPv6 host in brackets).
    Network {
        host: &'a str,
        port: u16,
    },
}

/// The action a summary describes; `None` for text the agent does not write.
pub(super) fn parse(summary: &str) -> Option<Said<'_>> {
    if let Some(said) = summary.strip_prefix("CONNECT ").and_then(network) {
        return Some(said);
    }
    if let Some(rest) = summary.strip_prefix("ssh ") {
        let (_, rest) = rest.split_once(" `")?;
        let end = rest.rfind("` (credential ")?;
        return Some(Said::Ssh {
            command: &rest[..end],
        });
    }
    let (method, rest) = summary.split_once(' ')?;
    let (url, tail) = rest.split_once(' ')?;
    if !tail.starts_with("(credential ") || method.is_empty() {
        return None;
    }
    let (_, after_scheme) = url.split_once("://")?;
    let at = after_scheme.find('/')?;
    let (path, query) = match after_scheme[at..].split_once('?') {
        Some((p, q)) => (p, q),
        None => (&after_scheme[at..], ""),
    };
    Some(Said::Http {
        method,
        path,
        query,
    })
}

/// `host:port` or `[v6]:port`, and nothing else.
fn network(authority: &str) -> Option<Said<'_>> {
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => v6.split_once("]:")?,
        None => authority
            .rsplit_once(':')
            .filter(|(h, _)| !h.contains(':'))?,
    };
    if host.is_empty() || host.contains([' ', '/', '[', ']']) {
        return None;
    }
    Some(Said::Network {
        host,
        port: port.parse().ok()?,
    })
}

/// Whether the query names a `_method` parameter, in any spelling a framework may honour.
fn rewrites_method(query: &str) -> bool {
    query.split('&').any(|pair| {
        let name = pair
            .split_once('=')
            .map_or(pair, |(n, _)| n)
            .to_ascii_lowercase();
        name == "_method" || name == "%5fmethod"
    })
}

/// Whether the summary is of a read as far as a summary shows (GET or HEAD, no `_method`).
pub(super) fn is_read(said: Said<'_>) -> bool {
    match said {
        Said::Http { method, query, .. } => {
            matches!(method, "GET" | "HEAD") && !rewrites_method(query)
        }
        Said::Ssh { .. } | Said::Network { .. } => false,
    }
}

/// Whether `scope` covers the action the summary says ran.
pub(super) fn covers(scope: &GrantScope, said: Said<'_>) -> bool {
    match (scope, said) {
        (GrantScope::HttpReads { methods, prefix }, Said::Http { method, path, .. }) => {
            is_read(said)
                && prefix.ends_with('/')
                && methods.iter().any(|m| m == method)
                && path.starts_with(prefix.as_str())
        }
        (
            GrantScope::HttpWrite {
                method: m, path: p, ..
            },
            Said::Http { method, path, .. },
        ) => m == method && p == path,
        (GrantScope::SshCommand { command: c }, Said::Ssh { command }) => c == command,
        (GrantScope::Network { host: h, port: p }, Said::Network { host, port }) => {
            h == host && *p == port
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_reads_back_as_the_action_the_agent_described() {
        let get =
            "GET https://api.example.com:8443/repos/acme/app/issues?state=open (credential api)";
        assert_eq!(
            parse(get),
            Some(Said::Http {
                method: "GET",
                path: "/repos/acme/app/issues",
                query: "state=open"
            })
        );
        let team = "DELETE https://h/x (credential api, OpenBao secret version 3)";
        assert!(matches!(
            parse(team),
            Some(Said::Http {
                method: "DELETE",
                path: "/x",
                ..
            })
        ));
        let ssh = "ssh deploy@[::1]:22 `ls -la '`x` (credential web)` (credential web)";
        assert_eq!(
            parse(ssh),
            Some(Said::Ssh {
                command: "ls -la '`x` (credential web)"
            })
        );
        assert_eq!(parse("GET"), None);
        assert_eq!(parse("GET https://h/x"), None);
        assert_eq!(parse("GET h/x (credential a)"), None);
    }

    #[test]
    fn a_scope_covers_what_its_card_said_and_nothing_else() {
        let reads = GrantScope::HttpReads {
            methods: vec!["GET".into(), "HEAD".into()],
            prefix: "/repos/acme/app/".into(),
        };
        let said = |s: &'static str| parse(s).unwrap();
        assert!(covers(
            &reads,
            said("GET https://h/repos/acme/app/pulls?x=1 (credential a)")
        ));
        assert!(covers(
            &reads,
            said("HEAD https://h/repos/acme/app/ (credential a)")
        ));
        for s in [
            "DELETE https://h/repos/acme/app/pulls (credential a)",
            "GET https://h/repos/acme/application (credential a)",
            "GET https://h/repos/acme/app/x?_method=DELETE (credential a)",
            "GET https://h/repos/acme/app/x?a=1&_METHOD=PUT (credential a)",
            "ssh u@h:22 `ls` (credential a)",
        ] {
            assert!(!covers(&reads, said(s)), "{s}");
        }
        let write = GrantScope::HttpWrite {
            method: "POST".into(),
            path: "/items".into(),
            rewrites: vec![],
        };
        assert!(covers(
            &write,
            said("POST https://h/items?a=1 (credential a)")
        ));
        assert!(!covers(&write, said("PUT https://h/items (credential a)")));
        assert!(!covers(
            &write,
            said("POST https://h/items/2 (credential a)")
        ));
        let ssh = GrantScope::SshCommand {
            command: "uptime".into(),
        };
        assert!(covers(&ssh, said("ssh u@h:22 `uptime` (credential a)")));
        assert!(!covers(
            &ssh,
            said("ssh u@h:22 `uptime; rm -rf /` (credential a)")
        ));
        let net = GrantScope::Network {
            host: "registry.npmjs.org".into(),
            port: 443,
        };
        assert!(covers(&net, said("CONNECT registry.npmjs.org:443")));
        for s in [
            "CONNECT registry.npmjs.org:80",
            "CONNECT evil.registry.npmjs.org:443",
            "ssh u@registry.npmjs.org:443 `x` (credential a)",
        ] {
            assert!(!covers(&net, said(s)), "{s}");
        }
        let v6 = GrantScope::Network {
            host: "::1".into(),
            port: 8080,
        };
        assert!(covers(&v6, said("CONNECT [::1]:8080")));
        assert_eq!(parse("CONNECT ::1:8080"), None);
        assert_eq!(parse("CONNECT h"), None);
    }
}
