//! The one place that turns a finding into the command that moves it into the vault: `vault add
//! http|ssh … --secret-from …` where the secret's file can be addressed (`env:FILE#KEY` for a
//! dotenv line), else `--secret-stdin` with a note saying which line to paste, else a comment
//! saying honestly why no `vault add` fits and what to do instead. Never a value.
use super::Finding;
use std::path::Path;

/// How an HTTP credential carries its secret (the `vault add http` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Inject {
    Bearer,
    /// `--basic USER` (`None`: the placeholder `USER`).
    Basic(Option<&'static str>),
    /// `--header NAME [--format F]`.
    Header(&'static str, Option<&'static str>),
    /// `--query PARAM`.
    Query(&'static str),
}

/// A service a secret belongs to: the credential's name, its API host (`None`: a placeholder
/// the person fills in) and how the secret is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Service {
    pub(crate) name: &'static str,
    pub(crate) host: Option<&'static str>,
    pub(crate) inject: Inject,
}

const fn service(name: &'static str, host: &'static str, inject: Inject) -> Service {
    Service {
        name,
        host: Some(host),
        inject,
    }
}

pub(crate) const GITHUB: Service = service("github", "api.github.com", Inject::Bearer);
pub(crate) const GITLAB: Service = service("gitlab", "gitlab.com", Inject::Bearer);
pub(crate) const NPM: Service = service("npm", "registry.npmjs.org", Inject::Bearer);
pub(crate) const OPENAI: Service = service("openai", "api.openai.com", Inject::Bearer);
pub(crate) const ANTHROPIC: Service = service(
    "anthropic",
    "api.anthropic.com",
    Inject::Header("x-api-key", None),
);
pub(crate) const STRIPE: Service = service("stripe", "api.stripe.com", Inject::Bearer);
pub(crate) const SLACK: Service = service("slack", "slack.com", Inject::Bearer);
pub(crate) const HUGGINGFACE: Service = service("huggingface", "huggingface.co", Inject::Bearer);
pub(crate) const PYPI: Service =
    service("pypi", "upload.pypi.org", Inject::Basic(Some("__token__")));
pub(crate) const CRATES_IO: Service = service(
    "crates-io",
    "crates.io",
    Inject::Header("Authorization", None),
);
pub(crate) const RUBYGEMS: Service = service(
    "rubygems",
    "rubygems.org",
    Inject::Header("Authorization", None),
);
pub(crate) const GOOGLE_API_KEY: Service = Service {
    name: "google",
    host: None,
    inject: Inject::Query("key"),
};

/// A bearer token for a host the file does not name.
pub(crate) const fn generic(name: &'static str) -> Service {
    Service {
        name,
        host: None,
        inject: Inject::Bearer,
    }
}

/// The service of a well-known host (a credential file names `github.com`, the API is
/// `api.github.com`), else basic auth against that host.
pub(crate) fn for_host(host: &str) -> (Service, Option<String>) {
    match host {
        "github.com" | "api.github.com" => (GITHUB, None),
        "gitlab.com" => (GITLAB, None),
        "registry.npmjs.org" => (NPM, None),
        "upload.pypi.org" | "pypi.org" => (PYPI, None),
        "crates.io" => (CRATES_IO, None),
        "rubygems.org" => (RUBYGEMS, None),
        _ => (
            Service {
                name: "NAME",
                host: None,
                inject: Inject::Basic(None),
            },
            Some(host.to_owned()),
        ),
    }
}

/// Where `vault add` reads the secret from.
#[derive(Debug, Clone)]
pub(crate) enum From<'a> {
    /// `--secret-from env:FILE#KEY`.
    Env { file: &'a Path, key: &'a str },
    /// `--secret-stdin`, fed by a command that prints it (`gh auth token`).
    Pipe(String),
    /// `--secret-stdin`, the person pastes `what` ("the value", "the password in the URL") from
    /// this line of this file.
    Paste {
        file: &'a Path,
        line: usize,
        what: &'static str,
    },
}

/// What to suggest for one finding.
#[derive(Debug, Clone)]
pub(crate) enum Suggestion<'a> {
    Http {
        service: Service,
        /// A host read from the file (overrides `service.host`).
        host: Option<String>,
        /// A name read from the file (a dotenv key), overrides `service.name`.
        name: Option<String>,
        from: From<'a>,
    },
    Ssh {
        key_file: &'a Path,
    },
    /// No `vault add` fits: what to do instead (a shell comment).
    Advice(String),
}

impl Suggestion<'_> {
    /// The command line (or comment) for the report.
    pub(crate) fn command(&self) -> String {
        match self {
            Suggestion::Ssh { key_file } => {
                let file = shell_word(&key_file.to_string_lossy());
                format!(
                    "vault add ssh NAME --host HOST --user USER --key-file {file} --fetch-host-key  # then give the file a passphrase: ssh-keygen -p -f {file}"
                )
            }
            Suggestion::Advice(why) => format!("# {why}"),
            Suggestion::Http {
                service,
                host,
                name,
                from,
            } => {
                let name = name.as_deref().unwrap_or(service.name);
                let host = host.as_deref().or(service.host).unwrap_or("HOST");
                let inject = match service.inject {
                    Inject::Bearer => "--bearer".to_owned(),
                    Inject::Basic(user) => format!("--basic {}", user.unwrap_or("USER")),
                    Inject::Header(h, None) => format!("--header {h}"),
                    Inject::Header(h, Some(f)) => {
                        format!("--header {h} --format {}", shell_word(f))
                    }
                    Inject::Query(q) => format!("--query {q}"),
                };
                let add = format!(
                    "vault add http {} --host {} {inject}",
                    shell_word(name),
                    shell_word(host)
                );
                match from {
                    From::Env { file, key } => format!(
                        "{add} --secret-from {} --remove-from-source",
                        shell_word(&format!("env:{}#{key}", file.to_string_lossy()))
                    ),
                    From::Pipe(cmd) => format!("{cmd} | {add} --secret-stdin"),
                    From::Paste { file, line, what } => format!(
                        "{add} --secret-stdin  # paste {what} on line {line} of {}, then remove it there",
                        file.to_string_lossy()
                    ),
                }
            }
        }
    }
}

/// What to do with a password inside a URL (`postgres://user:pw@db/app`): no source takes part
/// of a value, and a database is no HTTP API.
pub(crate) const URL_PASSWORD_ADVICE: &str = "a password inside a URL: `vault add` takes no part of a value; for an HTTP API, `vault add http NAME --host HOST --basic USER --secret-stdin` and paste only the password; for a database, let the agent reach it through an approved `vault add ssh` host; then remove the password from this file";

/// A name for a credential from a dotenv key: `GITHUB_TOKEN` → `github-token`.
pub(crate) fn name_from_key(key: &str) -> String {
    let name: String = key
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .chars()
        .map(|c| match c {
            'A'..='Z' => c.to_ascii_lowercase(),
            'a'..='z' | '0'..='9' | '.' | '-' => c,
            _ => '-',
        })
        .take(64)
        .collect();
    if name.is_empty() {
        "NAME".to_owned()
    } else {
        name
    }
}

/// `s` as one shell word: bare when it holds only safe characters, else single-quoted.
pub(crate) fn shell_word(s: &str) -> String {
    let safe = !s.is_empty()
        && s.bytes().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    b'/' | b'.' | b'_' | b'-' | b':' | b'@' | b'#' | b',' | b'+' | b'='
                )
        });
    if safe {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// A finding at `path`:`line` of `kind`, with the command that `s` suggests.
pub(super) fn finding(path: &Path, line: usize, kind: &'static str, s: Suggestion<'_>) -> Finding {
    Finding {
        path: path.to_owned(),
        line,
        kind,
        command: s.command(),
    }
}

pub(super) fn paste(
    path: &Path,
    line: usize,
    service: Service,
    host: Option<String>,
) -> Suggestion<'_> {
    paste_what(path, line, service, host, "the value")
}

fn paste_what<'a>(
    path: &'a Path,
    line: usize,
    service: Service,
    host: Option<String>,
    what: &'static str,
) -> Suggestion<'a> {
    Suggestion::Http {
        service,
        host,
        name: None,
        from: From::Paste {
            file: path,
            line,
            what,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_read_as_the_add_flags() {
        let file = Path::new("/p/my app/.env");
        let s = Suggestion::Http {
            service: generic("x"),
            host: None,
            name: Some(name_from_key("STRIPE_SECRET")),
            from: From::Env {
                file,
                key: "STRIPE_SECRET",
            },
        };
        assert_eq!(
            s.command(),
            "vault add http stripe-secret --host HOST --bearer --secret-from 'env:/p/my app/.env#STRIPE_SECRET' --remove-from-source"
        );
        let s = Suggestion::Http {
            service: GITHUB,
            host: None,
            name: None,
            from: From::Pipe("gh auth token --hostname github.com".into()),
        };
        assert_eq!(
            s.command(),
            "gh auth token --hostname github.com | vault add http github --host api.github.com --bearer --secret-stdin"
        );
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }
}
