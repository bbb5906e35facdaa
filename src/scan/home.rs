//! The usual places under the home directory where tools keep credentials in the clear: each
//! file's location tells its kind, and a small reader per format finds the lines that hold a
//! secret (never keeping or returning the value).
use super::suggest::{self, finding, paste, From, Inject, Service, Suggestion};
use super::{json, present, Finding};
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
    (".docker/config.json", json::docker),
    (".pypirc", pypirc),
    (".cargo/credentials.toml", cargo),
    (".cargo/credentials", cargo),
    (".config/hub", hub),
    (".kube/config", kube),
    (".gem/credentials", gem),
    (".terraform.d/credentials.tfrc.json", json::terraform),
    (".pgpass", pgpass),
    (".composer/auth.json", json::composer),
    (".config/composer/auth.json", json::composer),
    (
        ".config/gcloud/application_default_credentials.json",
        json::gcloud,
    ),
];

/// Directories under the home directory whose `*/adc.json` are read as gcloud's.
pub(crate) const GCLOUD_LEGACY: &str = ".config/gcloud/legacy_credentials";

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
        Err(russh::keys::Error::KeyIsEncrypted) => false,
        // ssh-key refuses one ECDSA key in about 256 (a private number a byte short): its
        // header still says whether it is encrypted.
        Err(_) => openssh_unencrypted(&text),
    }
}

/// An `openssh-key-v1` key whose cipher is `none`.
fn openssh_unencrypted(text: &str) -> bool {
    use base64::Engine;
    let body: String = text
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .map(str::trim)
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .is_ok_and(|blob| {
            blob.strip_prefix(b"openssh-key-v1\0")
                .and_then(|rest| rest.get(..8))
                == Some(b"\0\0\0\x04none")
        })
}

#[cfg(test)]
#[test]
fn a_key_ssh_key_cannot_read_is_still_seen_unencrypted() {
    let dir = std::env::temp_dir().join(format!("av-scan-short-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("id_ecdsa");
    std::fs::write(
        &key,
        include_str!("../credentials/testdata/ecdsa_p256_short_scalar"),
    )
    .unwrap();
    let seen = unencrypted_key(&key);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(seen, "an unencrypted key vault scan would not report");
}
