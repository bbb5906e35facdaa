//! What counts as a secret on a dotenv line: the line parser (`export `, quotes, comments, `=`
//! inside values, quoted values over several lines) and the classification of a key and its
//! value, by well-known value prefixes first and secret-sounding key names second.
//!
//! The list is this module's own, small and explicit: the maintained rule sets (gitleaks' and
//! Nosey Parker's) are other projects' data files, and the Rust crates that carry a list are
//! young or need a newer toolchain than this crate's; see the commit that added it.
use super::suggest::{self, Service};

/// One `KEY=value` assignment: its 1-based line, its key and its value (without quotes; escapes
/// left as they are: only the value's shape is looked at, never its text shown).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Assignment<'a> {
    pub(crate) line: usize,
    pub(crate) key: &'a str,
    pub(crate) value: &'a str,
}

/// Every assignment of a dotenv file. A quoted value left open on its line runs to the line
/// that closes it (those lines are not read as assignments of their own).
pub(crate) fn assignments(text: &str) -> Vec<Assignment<'_>> {
    let mut out = Vec::new();
    let mut open: Option<char> = None;
    for (i, raw) in text.lines().enumerate() {
        if let Some(q) = open {
            if closing_quote(raw, q).is_some() {
                open = None;
            }
            continue;
        }
        let Some((key, rest)) = split_assignment(raw) else {
            continue;
        };
        let (value, still_open) = value_of(rest);
        if still_open {
            open = rest.chars().next();
        }
        out.push(Assignment {
            line: i + 1,
            key,
            value,
        });
    }
    out
}

/// `KEY` and the text after `=` of an assignment line (comment and blank lines: `None`).
fn split_assignment(raw: &str) -> Option<(&str, &str)> {
    let line = raw.trim_start();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let line = match line.strip_prefix("export") {
        Some(rest) if rest.starts_with([' ', '\t']) => rest.trim_start(),
        _ => line,
    };
    let (key, rest) = line.split_once('=')?;
    let key = key.trim_end();
    let ok = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    ok.then_some((key, rest.trim_start()))
}

/// The value after `=`: inside its quotes, or up to an inline ` #` comment. The flag says a
/// quote was opened and not closed on this line.
fn value_of(rest: &str) -> (&str, bool) {
    match rest.chars().next() {
        Some(q @ ('"' | '\'' | '`')) => {
            let body = &rest[1..];
            match closing_quote(body, q) {
                Some(end) => (&body[..end], false),
                None => (body, true),
            }
        }
        _ => {
            let end = rest
                .char_indices()
                .find(|&(i, c)| c == '#' && rest[..i].ends_with([' ', '\t']))
                .map_or(rest.len(), |(i, _)| i);
            (rest[..end].trim_end(), false)
        }
    }
}

/// The byte offset of the quote `q` that closes a value in `s` (a `\"` inside double quotes
/// does not close it).
fn closing_quote(s: &str, q: char) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' && q == '"' {
            escaped = true;
        } else if c == q {
            return Some(i);
        }
    }
    None
}

/// What a secret on a dotenv line is: its kind and the service it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Class {
    pub(crate) kind: &'static str,
    pub(crate) service: Fit,
}

/// Whether a `vault add http` can hold the value as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    Http(Service),
    /// AWS signs each request (SigV4): no vault kind can.
    Aws,
    /// A password inside a URL: only part of the value is the secret.
    UrlPassword,
    /// A PEM private key: no bearer token.
    PrivateKey,
}

/// Value prefixes that name their issuer (at least `min` characters in all, so a bare prefix
/// or a word that happens to start the same way is not one).
const PREFIXES: &[(&str, usize, &str, Fit)] = &[
    (
        "github_pat_",
        30,
        "github-token",
        Fit::Http(suggest::GITHUB),
    ),
    ("ghp_", 20, "github-token", Fit::Http(suggest::GITHUB)),
    ("gho_", 20, "github-token", Fit::Http(suggest::GITHUB)),
    ("ghu_", 20, "github-token", Fit::Http(suggest::GITHUB)),
    ("ghs_", 20, "github-token", Fit::Http(suggest::GITHUB)),
    ("ghr_", 20, "github-token", Fit::Http(suggest::GITHUB)),
    ("glpat-", 20, "gitlab-token", Fit::Http(suggest::GITLAB)),
    (
        "sk-ant-",
        20,
        "anthropic-key",
        Fit::Http(suggest::ANTHROPIC),
    ),
    ("sk_live_", 20, "stripe-key", Fit::Http(suggest::STRIPE)),
    ("rk_live_", 20, "stripe-key", Fit::Http(suggest::STRIPE)),
    ("sk-", 20, "openai-key", Fit::Http(suggest::OPENAI)),
    ("xoxb-", 15, "slack-token", Fit::Http(suggest::SLACK)),
    ("xoxp-", 15, "slack-token", Fit::Http(suggest::SLACK)),
    ("xoxa-", 15, "slack-token", Fit::Http(suggest::SLACK)),
    ("xoxs-", 15, "slack-token", Fit::Http(suggest::SLACK)),
    ("npm_", 20, "npm-token", Fit::Http(suggest::NPM)),
    ("pypi-", 20, "pypi-token", Fit::Http(suggest::PYPI)),
    (
        "hf_",
        20,
        "huggingface-token",
        Fit::Http(suggest::HUGGINGFACE),
    ),
    (
        "AIza",
        30,
        "google-api-key",
        Fit::Http(suggest::GOOGLE_API_KEY),
    ),
    ("AKIA", 20, "aws-access-key", Fit::Aws),
    ("ASIA", 20, "aws-access-key", Fit::Aws),
    ("-----BEGIN", 20, "private-key", Fit::PrivateKey),
];

/// Key-name words that say the value is a secret wherever they stand in the key.
const SECRET_WORDS: &[&str] = &["SECRET", "PASSWORD", "PASSWD", "PRIVATE_KEY", "CREDENTIAL"];
/// Key-name endings that say so (`GITHUB_TOKEN`, `OPENAI_API_KEY`, `DB_PASS`, `NPM_AUTH`).
const SECRET_ENDINGS: &[&str] = &[
    "TOKEN",
    "_KEY",
    "APIKEY",
    "API_KEY",
    "_PASS",
    "_PWD",
    "_AUTH",
    "PASSPHRASE",
];
/// Keys whose value is public by name (`STRIPE_PUBLISHABLE_KEY`, `NEXT_PUBLIC_…`).
const PUBLIC_WORDS: &[&str] = &["PUBLIC", "PUBLISHABLE"];

/// The class of `key=value`, or `None` when it is not a secret (or an empty value, a
/// `$REFERENCE` or a `<placeholder>`).
pub(crate) fn classify(key: &str, value: &str) -> Option<Class> {
    let value = value.trim();
    if placeholder(value) {
        return None;
    }
    for &(prefix, min, kind, service) in PREFIXES {
        if value.starts_with(prefix) && value.len() >= min {
            return Some(Class { kind, service });
        }
    }
    let upper = key.to_ascii_uppercase();
    if upper.starts_with("AWS_") && (upper.contains("SECRET") || upper.ends_with("SESSION_TOKEN")) {
        return Some(Class {
            kind: "aws-secret-key",
            service: Fit::Aws,
        });
    }
    if url_with_password(value) {
        return Some(Class {
            kind: "url-password",
            service: Fit::UrlPassword,
        });
    }
    let secret_name = SECRET_WORDS.iter().any(|w| upper.contains(w))
        || SECRET_ENDINGS.iter().any(|e| upper.ends_with(e))
        || matches!(upper.as_str(), "PASS" | "PWD" | "KEY" | "AUTH");
    if secret_name && !PUBLIC_WORDS.iter().any(|w| upper.contains(w)) {
        return Some(Class {
            kind: "env-secret",
            service: Fit::Http(suggest::generic("NAME")),
        });
    }
    None
}

/// Empty, a reference to another variable, or an obvious stand-in (`<token>`, `xxxx`, `****`).
fn placeholder(v: &str) -> bool {
    v.is_empty()
        || v.starts_with('$')
        || (v.starts_with('<') && v.ends_with('>'))
        || v.chars()
            .all(|c| matches!(c, 'x' | 'X' | '*' | '.' | '-' | '_'))
        || matches!(
            v.to_ascii_lowercase().as_str(),
            "changeme" | "change-me" | "none" | "null" | "false" | "true" | "todo" | "secret"
        )
}

/// `scheme://user:password@host…` with a non-empty password.
fn url_with_password(v: &str) -> bool {
    let Some((_, rest)) = v.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority.rsplit_once('@').is_some_and(|(userinfo, _)| {
        userinfo
            .split_once(':')
            .is_some_and(|(_, pass)| !pass.is_empty() && !placeholder(pass))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_as_dotenv_does() {
        let text = "# comment\n\nexport API_TOKEN=\"a=b#c\" # note\nPLAIN=v=1 # c\nHASH=a#b\n\
                    SINGLE='x y'\nMULTI=\"-----BEGIN\nA=B\n-----END\"\nNEXT=1\n  not a line\nexporter=2\n";
        let got: Vec<_> = assignments(text)
            .into_iter()
            .map(|a| (a.line, a.key, a.value))
            .collect();
        assert_eq!(
            got,
            [
                (3, "API_TOKEN", "a=b#c"),
                (4, "PLAIN", "v=1"),
                (5, "HASH", "a#b"),
                (6, "SINGLE", "x y"),
                (7, "MULTI", "-----BEGIN"),
                (10, "NEXT", "1"),
                (12, "exporter", "2"),
            ]
        );
    }

    #[test]
    fn secrets_by_prefix_and_by_name_and_not_the_rest() {
        let kind = |k, v| classify(k, v).map(|c| c.kind);
        assert_eq!(kind("X", "ghp_0123456789abcdefghij"), Some("github-token"));
        assert_eq!(
            kind("ANTHROPIC", "sk-ant-0123456789abcdef"),
            Some("anthropic-key")
        );
        assert_eq!(
            kind("DATABASE_URL", "postgres://u:pw@db/x"),
            Some("url-password")
        );
        assert_eq!(kind("AWS_SECRET_ACCESS_KEY", "abc"), Some("aws-secret-key"));
        assert_eq!(kind("STRIPE_SECRET", "whatever"), Some("env-secret"));
        assert_eq!(kind("PASSWORD", "hunter2"), Some("env-secret"));
        for (k, v) in [
            ("PORT", "8080"),
            ("DEBUG", "1"),
            ("API_KEY", ""),
            ("API_KEY", "${OTHER}"),
            ("API_KEY", "<your key>"),
            ("STRIPE_PUBLISHABLE_KEY", "pk_live_abc"),
            ("TOKEN_URL", "https://example.com/token"),
            ("DATABASE_URL", "postgres://db/x"),
        ] {
            assert_eq!(kind(k, v), None, "{k}");
        }
    }
}
