//! The JSON credential files under the home directory (docker, terraform, composer, gcloud):
//! which string leaves hold a secret, the line each is on, and what moves it.
use super::suggest::{self, finding, paste, Inject, Service, Suggestion};
use super::{present, Finding};
use std::path::{Path, PathBuf};

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

pub(super) fn docker(path: &Path, text: &str) -> Vec<Finding> {
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

pub(super) fn terraform(path: &Path, text: &str) -> Vec<Finding> {
    json_secrets(text, &["token"])
        .into_iter()
        .map(|(line, host, _)| {
            let s = paste(path, line, suggest::generic("terraform"), Some(host));
            finding(path, line, "terraform-token", s)
        })
        .collect()
}

pub(super) fn composer(path: &Path, text: &str) -> Vec<Finding> {
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

pub(super) fn gcloud(path: &Path, text: &str) -> Vec<Finding> {
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
