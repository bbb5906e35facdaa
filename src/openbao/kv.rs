//! KV version 2: read one field of a secret (the latest version or a given one) with the version
//! it came from, write a secret with check-and-set, and read a secret's metadata (its current
//! version). A read keeps only the field asked for: the other fields' values are borrowed from
//! the answer's buffer, which is wiped when dropped, and never copied.

use super::{api_path, parse, Call, Client, Error, Token};
use secrecy::SecretString;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeMap;
use zeroize::Zeroizing;

/// One field of a KV v2 secret. Debug shows the value as `[REDACTED]`.
#[derive(Debug)]
pub struct KvSecret {
    pub value: SecretString,
    /// The KV version the value came from.
    pub version: u64,
    pub field: String,
}

/// A KV v2 secret's metadata (`MOUNT/metadata/PATH`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvMetadata {
    /// The latest version (0 when none was ever written).
    pub current_version: u64,
    pub oldest_version: u64,
    /// Whether every write to it must carry check-and-set.
    pub cas_required: bool,
    /// RFC 3339.
    pub updated_time: String,
}

#[derive(Deserialize)]
struct ReadBody<'a> {
    #[serde(borrow)]
    data: ReadData<'a>,
}

#[derive(Deserialize)]
struct ReadData<'a> {
    #[serde(borrow)]
    data: Option<BTreeMap<Cow<'a, str>, &'a RawValue>>,
    metadata: VersionMeta,
}

#[derive(Deserialize)]
struct VersionMeta {
    version: u64,
}

impl Client {
    /// The value of `field` in the KV v2 secret `MOUNT/data/PATH`, at `version` or the latest.
    pub fn kv_read(
        &self,
        token: &Token,
        mount: &str,
        path: &str,
        field: &str,
        version: Option<u64>,
    ) -> Result<KvSecret, Error> {
        let api = api_path(mount, Some("data"), path)?;
        let call = Call {
            method: "GET",
            path: &api,
            secrets: &[token.expose_secret()],
        };
        let query = version.map(|v| ("version", v.to_string()));
        let body = self
            .send(&call, Some(token), query, None)?
            .ok(self, &call)?;
        let read: ReadBody<'_> = parse(&body, &api)?;
        let version = read.data.metadata.version;
        // A deleted or destroyed version answers 404 with its metadata; guard a null anyway.
        let Some(fields) = read.data.data else {
            return Err(Error::NotFound {
                path: api,
                detail: Some(format!("version {version} was deleted or destroyed")),
            });
        };
        let Some(raw) = fields.get(field) else {
            return Err(Error::MissingField {
                path: api,
                version,
                field: field.to_owned(),
                fields: fields.keys().map(|k| k.to_string()).collect(),
            });
        };
        let value: Zeroizing<String> =
            serde_json::from_str(raw.get()).map_err(|_| Error::Unexpected {
                path: api.clone(),
                what: format!("the field `{field}` is not a string"),
            })?;
        Ok(KvSecret {
            value: SecretString::from(value.as_str()),
            version,
            field: field.to_owned(),
        })
    }

    /// Writes `fields` as a new version of `MOUNT/data/PATH` and returns that version. With
    /// `cas: Some(n)` OpenBao writes only if the current version is `n` (0: only if the secret
    /// does not exist yet), else `Error::CasMismatch`.
    pub fn kv_write(
        &self,
        token: &Token,
        mount: &str,
        path: &str,
        fields: &[(&str, &str)],
        cas: Option<u64>,
    ) -> Result<u64, Error> {
        #[derive(serde::Serialize)]
        struct Body<'a> {
            data: BTreeMap<&'a str, &'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            options: Option<Options>,
        }
        #[derive(serde::Serialize)]
        struct Options {
            cas: u64,
        }
        #[derive(Deserialize)]
        struct Written {
            data: VersionMeta,
        }
        let api = api_path(mount, Some("data"), path)?;
        let mut secrets: Vec<&str> = fields.iter().map(|(_, v)| *v).collect();
        secrets.push(token.expose_secret());
        let call = Call {
            method: "POST",
            path: &api,
            secrets: &secrets,
        };
        let body = Zeroizing::new(
            serde_json::to_vec(&Body {
                data: fields.iter().copied().collect(),
                options: cas.map(|cas| Options { cas }),
            })
            .expect("strings serialize"),
        );
        let reply = self.send(&call, Some(token), None, Some(&body))?;
        if let (400, Some(cas)) = (reply.status, cas) {
            if super::error::server_text(&reply.body, call.secrets).contains("check-and-set") {
                return Err(Error::CasMismatch { path: api, cas });
            }
        }
        let body = reply.ok(self, &call)?;
        Ok(parse::<Written>(&body, &api)?.data.version)
    }

    /// The metadata of `MOUNT/metadata/PATH`: its current version, for a check-and-set write.
    pub fn kv_metadata(&self, token: &Token, mount: &str, path: &str) -> Result<KvMetadata, Error> {
        #[derive(Deserialize)]
        struct Body {
            data: Data,
        }
        #[derive(Deserialize)]
        struct Data {
            current_version: u64,
            #[serde(default)]
            oldest_version: u64,
            #[serde(default)]
            cas_required: bool,
            #[serde(default)]
            updated_time: String,
        }
        let api = api_path(mount, Some("metadata"), path)?;
        let call = Call {
            method: "GET",
            path: &api,
            secrets: &[token.expose_secret()],
        };
        let body = self.send(&call, Some(token), None, None)?.ok(self, &call)?;
        let d = parse::<Body>(&body, &api)?.data;
        Ok(KvMetadata {
            current_version: d.current_version,
            oldest_version: d.oldest_version,
            cas_required: d.cas_required,
            updated_time: d.updated_time,
        })
    }
}
