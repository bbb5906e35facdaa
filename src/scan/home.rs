//! The usual places under the home directory where tools keep credentials in the clear: each
//! file's location tells its kind, and a small reader per format finds the lines that hold a
//! secret (never keeping or returning the value).
use super::suggest::{self, From, Inject, Service, Suggestion};
use super::Finding;
use std::path::{Path, PathBuf};

/// A reader: the findings of one file's text.
type Reader = fn(&Path, &str) -> Vec<Finding>;

/// The files, relative to the home directory, and how each is read.
pub(crate) const PLACES: &[(&str, Reader)] = &[
    (".npmrc", npmrc),
    (".netrc", netrc),
    (".git-credentials", git_credentials),
    (".aws/credentials", aws),
    (".config/gh/hosts.yml", gh_hosts),
    (".docker/config.json", docker),
    (".pypirc", pypirc),
    (".cargo/credentials.toml", cargo),
    (".cargo/credentials", cargo),
    (".config/hub", hub),
    (".kube/config", kube),
    (".gem/credentials", gem),
    (".terraform.d/credentials.tfrc.json", terraform),
    (".pgpass", pgpass),
    (".composer/auth.json", composer),
    (".config/composer/auth.json", composer),
    (
        ".config/gcloud/application_default_credentials.json",
        gcloud,
    ),
];

/// Directories under the home directory whose `*/adc.json` are read as gcloud's.
pub(crate) const GCLOUD_LEGACY: &str = ".config/gcloud/legacy_credentials";

fn finding(path: &Path, line: usize, kind: &'static str, s: Suggestion<'_>) -> Finding {
    Finding {
        path: path.to_owned(),
        line,
        kind,
        command: s.command(),
    }
}

fn paste(path: &Path, line: usize, service: Service, host: Option<String>) -> Suggestion<'_> {
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

/// `key<sep>value` lines (ini, flat YAML, TOML): 1-based line, key and the value's text, with
/// the section (`[name]`) or top-level YAML key each line is under. Comments and blank lines
/// are skipped.
fn pairs(text: &str, sep: char) -> Vec<(usize, String, &str, &str)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = s.trim().to_owned();
            continue;
        }
        let top = !raw.starts_with([' ', '\t', '-']);
        // A Ruby symbol key (`:rubygems_api_key: …` in ~/.gem/credentials).
        let line = if sep == ':' {
            line.strip_prefix(':').unwrap_or(line)
        } else {
            line
        };
        let Some((k, v)) = line.split_once(sep) else {
            continue;
        };
        let (k, v) = (k.trim().trim_start_matches(['-', ' ']), v.trim());
        if top && sep == ':' && v.is_empty() {
            section = k.trim_matches(['"', '\'']).to_owned();
            continue;
        }
        out.push((i + 1, section.clone(), k.trim_matches(['"', '\'', ':']), v));
    }
    out
}

/// A value that is really there (not empty, not a `${VAR}` reference, not `""`).
fn present(v: &str) -> bool {
    let v = v.trim().trim_matches(['"', '\'']);
    !v.is_empty() && !v.starts_with('$') && v != "null" && v != "~"
}

pub(crate) fn npmrc(path: &Path, text: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for (line, _, key, value) in pairs(text, '=') {
        let field = key.rsplit(':').next().unwrap_or(key);
        if !matches!(field, "_authToken" | "_auth" | "_password") || !present(value) {
            continue;
        }
        let host = key
            .strip_prefix("//")
            .and_then(|k| k.split(['/', ':']).next())
            .unwrap_or("registry.npmjs.org");
        let (mut service, host) = suggest::for_host(host);
        service.name = "npm";
        service.inject = match field {
            "_authToken" => Inject::Bearer,
            "_auth" => Inject::Header("Authorization", Some("Basic {secret}")),
            _ => Inject::Basic(None),
        };
        out.push(finding(
            path,
            line,
            "npm-token",
            paste(path, line, service, host),
        ));
    }
    out
}

fn netrc(path: &Path, text: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut machine: Option<String> = None;
    let mut words = text
        .lines()
        .enumerate()
        .flat_map(|(i, l)| l.split_whitespace().map(move |w| (i + 1, w)));
    while let Some((_, w)) = words.next() {
        match w {
            "machine" => machine = words.next().map(|(_, m)| m.to_owned()),
            "default" => machine = None,
            "login" | "account" => {
                words.next();
            }
            "password" => {
                let Some((line, _)) = words.next() else { break };
                let (service, host) = match &machine {
                    Some(m) => suggest::for_host(m),
                    None => (suggest::generic("NAME"), None),
                };
                out.push(finding(
                    path,
                    line,
                    "netrc-password",
                    paste(path, line, service, host),
                ));
            }
            _ => {}
        }
    }
    out
}

fn git_credentials(path: &Path, text: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Ok(url) = url::Url::parse(line.trim()) else {
            continue;
        };
        if url.password().is_none_or(str::is_empty) {
            continue;
        }
        let (service, host) = suggest::for_host(url.host_str().unwrap_or("HOST"));
        out.push(finding(
            path,
            i + 1,
            "git-credentials",
            paste(path, i + 1, service, host),
        ));
    }
    out
}

const AWS_ADVICE: &str = "no vault kind signs AWS requests (SigV4) yet: remove this line and use short-lived credentials (`aws sso login`) instead";

fn aws(path: &Path, text: &str) -> Vec<Finding> {
    pairs(text, '=')
        .into_iter()
        .filter(|(_, _, k, v)| {
            matches!(*k, "aws_secret_access_key" | "aws_session_token") && present(v)
        })
        .map(|(line, ..)| {
            finding(
                path,
                line,
                "aws-credentials",
                Suggestion::Advice(AWS_ADVICE.into()),
            )
        })
        .collect()
}

fn gh_hosts(path: &Path, text: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for (line, host, key, value) in pairs(text, ':') {
        if key != "oauth_token" || !present(value) {
            continue;
        }
        let (service, api) = if host == "github.com" {
            (suggest::GITHUB, None)
        } else {
            (suggest::generic("github"), Some(host.clone()))
        };
        let s = Suggestion::Http {
            service,
            host: api,
            name: None,
            from: From::Pipe(format!(
                "gh auth token --hostname {}",
                suggest::shell_word(&host)
            )),
        };
        out.push(finding(path, line, "gh-token", s));
    }
    out
}

fn hub(path: &Path, text: &str) -> Vec<Finding> {
    pairs(text, ':')
        .into_iter()
        .filter(|(_, _, k, v)| *k == "oauth_token" && present(v))
        .map(|(line, host, ..)| {
            let (service, host) = suggest::for_host(&host);
            finding(path, line, "hub-token", paste(path, line, service, host))
        })
        .collect()
}

fn pypirc(path: &Path, text: &str) -> Vec<Finding> {
    pairs(text, '=')
        .into_iter()
        .filter(|(_, _, k, v)| *k == "password" && present(v))
        .map(|(line, section, _, value)| {
            let host = match section.as_str() {
                "pypi" => None,
                "testpypi" => Some("test.pypi.org".to_owned()),
                _ => Some("HOST".to_owned()),
            };
            let mut service = suggest::PYPI;
            if !value.starts_with("pypi-") {
                service.inject = Inject::Basic(None);
            }
            finding(
                path,
                line,
                "pypi-password",
                paste(path, line, service, host),
            )
        })
        .collect()
}

fn cargo(path: &Path, text: &str) -> Vec<Finding> {
    pairs(text, '=')
        .into_iter()
        .filter(|(_, _, k, v)| *k == "token" && present(v))
        .map(|(line, section, ..)| {
            let host = (section != "registry").then(|| "HOST".to_owned());
            finding(
                path,
                line,
                "cargo-token",
                paste(path, line, suggest::CRATES_IO, host),
            )
        })
        .collect()
}

fn kube(path: &Path, text: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for (line, _, key, value) in pairs(text, ':') {
        if !present(value) {
            continue;
        }
        let (kind, s) = match key {
            "token" => ("kube-token", paste(path, line, suggest::generic("kube"), None)),
            "password" => (
                "kube-password",
                paste(
                    path,
                    line,
                    Service {
                        name: "kube",
                        host: None,
                        inject: Inject::Basic(None),
                    },
                    None,
                ),
            ),
            "client-key-data" => ("kube-client-key", Suggestion::Advice(
                "no vault kind presents a client certificate: give this user a token or an exec plugin (your cluster's login command) and remove this key".into(),
            )),
            _ => continue,
        };
        out.push(finding(path, line, kind, s));
    }
    out
}

fn gem(path: &Path, text: &str) -> Vec<Finding> {
    pairs(text, ':')
        .into_iter()
        .filter(|(_, _, k, v)| k.ends_with("api_key") && present(v))
        .map(|(line, ..)| {
            finding(
                path,
                line,
                "gem-credentials",
                paste(path, line, suggest::RUBYGEMS, None),
            )
        })
        .collect()
}

fn pgpass(path: &Path, text: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with('#') {
            continue;
        }
        // host:port:database:user:password, `\:` being a colon inside a field.
        let fields = line.replace("\\\\", "").replace("\\:", "");
        let parts: Vec<&str> = fields.splitn(5, ':').collect();
        if parts.len() == 5 && !parts[4].is_empty() {
            out.push(finding(path, i + 1, "pgpass", Suggestion::Advice(format!(
                "no vault kind speaks PostgreSQL: remove line {} and let the agent reach the database through an approved `vault add ssh` host",
                i + 1
            ))));
        }
    }
    out
}

/// The JSON string leaves of a file as `(parent key, key)` pairs whose key is one of `keys` and
/// whose value is non-empty, each with the line it is on (the first line naming the key at or
/// after the line naming its parent). Not JSON: nothing.
fn json_secrets(text: &str, keys: &[&str]) -> Vec<(usize, String, String)> {
    fn walk(v: &serde_json::Value, parent: &str, keys: &[&str], out: &mut Vec<(String, String)>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, child) in m {
                    match child {
                        serde_json::Value::String(s)
                            if keys.contains(&k.as_str()) && present(s) =>
                        {
                            out.push((parent.to_owned(), k.clone()))
                        }
                        _ => walk(child, k, keys, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|c| walk(c, parent, keys, out)),
            _ => {}
        }
    }
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    walk(&value, "", keys, &mut found);
    drop(value);
    let lines: Vec<&str> = text.lines().collect();
    let line_of = |needle: &str, from: usize| {
        let quoted = format!("{:?}", needle);
        (from..lines.len()).find(|&i| lines[i].contains(&quoted))
    };
    found
        .into_iter()
        .map(|(parent, key)| {
            let start = if parent.is_empty() {
                0
            } else {
                line_of(&parent, 0).unwrap_or(0)
            };
            let line = line_of(&key, start)
                .or_else(|| line_of(&key, 0))
                .unwrap_or(0);
            (line + 1, parent, key)
        })
        .collect()
}

/// `https://index.docker.io/v1/` → `index.docker.io`.
fn host_of(registry: &str) -> String {
    let r = registry.split_once("://").map_or(registry, |(_, r)| r);
    r.split('/').next().unwrap_or(r).to_owned()
}

fn docker(path: &Path, text: &str) -> Vec<Finding> {
    json_secrets(text, &["auth", "identitytoken"])
        .into_iter()
        .map(|(line, registry, key)| {
            let host = host_of(&registry);
            if key == "auth" {
                let service = Service {
                    name: "registry",
                    host: None,
                    inject: Inject::Header("Authorization", Some("Basic {secret}")),
                };
                finding(path, line, "docker-auth", paste(path, line, service, Some(host)))
            } else {
                finding(path, line, "docker-token", Suggestion::Advice(format!(
                    "a registry refresh token: run `docker logout {}` and keep registry logins in a credential helper (credsStore)",
                    suggest::shell_word(&host)
                )))
            }
        })
        .collect()
}

fn terraform(path: &Path, text: &str) -> Vec<Finding> {
    json_secrets(text, &["token"])
        .into_iter()
        .map(|(line, host, _)| {
            let s = paste(path, line, suggest::generic("terraform"), Some(host));
            finding(path, line, "terraform-token", s)
        })
        .collect()
}

fn composer(path: &Path, text: &str) -> Vec<Finding> {
    // `{"http-basic": {HOST: {"username", "password"}}, "github-oauth": {"github.com": TOKEN},
    // "gitlab-token": {HOST: TOKEN}, "bearer": {HOST: TOKEN}}`: a token's key is its host.
    let Ok(serde_json::Value::Object(top)) = serde_json::from_str(text) else {
        return Vec::new();
    };
    let mut hosts = Vec::new();
    for (section, inner) in &top {
        let serde_json::Value::Object(inner) = inner else {
            continue;
        };
        for (host, v) in inner {
            let secret = match v {
                serde_json::Value::String(s) => present(s),
                serde_json::Value::Object(o) => o
                    .get("password")
                    .and_then(|p| p.as_str())
                    .is_some_and(present),
                _ => false,
            };
            if secret {
                hosts.push((section.clone(), host.clone()));
            }
        }
    }
    drop(top);
    let lines: Vec<&str> = text.lines().collect();
    hosts
        .into_iter()
        .map(|(section, host)| {
            let quoted = format!("{host:?}");
            let line = lines.iter().position(|l| l.contains(&quoted)).unwrap_or(0) + 1;
            let (mut service, h) = suggest::for_host(&host);
            if section != "http-basic" {
                service.inject = Inject::Bearer;
            }
            finding(path, line, "composer-auth", paste(path, line, service, h))
        })
        .collect()
}

const GCLOUD_ADVICE: &str = "a Google refresh token or service-account key: no vault kind signs Google requests yet; revoke it when not in use (`gcloud auth application-default revoke`)";

fn gcloud(path: &Path, text: &str) -> Vec<Finding> {
    json_secrets(text, &["refresh_token", "private_key"])
        .into_iter()
        .map(|(line, ..)| {
            finding(
                path,
                line,
                "gcloud-credentials",
                Suggestion::Advice(GCLOUD_ADVICE.into()),
            )
        })
        .collect()
}

/// `~/.config/gcloud/legacy_credentials/*/adc.json`, read as gcloud's.
pub(crate) fn gcloud_legacy(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path().join("adc.json"))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// The reader of a legacy gcloud file.
pub(crate) const GCLOUD_READER: Reader = gcloud;

/// Unencrypted private keys among `~/.ssh/id_*` (an encrypted key is no finding: an agent that
/// reads it still needs its passphrase).
pub(crate) fn ssh_keys(dir: &Path) -> Vec<Finding> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("id_") && !n.ends_with(".pub"))
        })
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter(|p| unencrypted_key(p))
        .map(|p| Finding {
            command: Suggestion::Ssh { key_file: &p }.command(),
            path: p,
            line: 1,
            kind: "ssh-key",
        })
        .collect()
}

fn unencrypted_key(path: &Path) -> bool {
    let Some(text) = super::read_small(path, 64 * 1024) else {
        return false;
    };
    match russh::keys::decode_secret_key(&text, None) {
        Ok(key) => !key.is_encrypted(),
        Err(_) => false,
    }
}
