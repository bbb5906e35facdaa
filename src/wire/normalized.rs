//! The normalized action: the one description of a request that its `action_hash` covers
//! (blake3 of its canonical JSON), that the card shows, that the approver signs by hash, and
//! that dispatch re-derives before anything runs. Written by `policy`, stored as canonical JSON
//! in `actions.normalized`, and read back only through this type (unknown fields refused).

/// The credential as the hash covers it (the card shows name and profile, so they are covered).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialRef {
    pub id: String,
    pub version: i64,
    pub name: String,
    pub profile: String,
}

/// A normalized `http_request`. `body_blake3` is always written (`null` without a body).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormalizedHttp {
    pub credential: CredentialRef,
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body_blake3: Option<String>,
    pub timeout_s: u64,
    pub max_output_bytes: u64,
    /// Team mode: the KV version of the OpenBao secret this action sends (resolved when it was
    /// asked for), so an approval of version 3 never sends version 4. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_version: Option<u64>,
    /// Asked through `vault run`'s proxy with a placeholder (answered byte for byte). Absent
    /// otherwise, so the hashes of every other request stay as they were.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub proxied: bool,
}

/// A normalized `ssh_exec`: where it runs (user, host, port, pinned key) and what is sent.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormalizedSsh {
    pub credential: CredentialRef,
    pub host: String,
    pub port: u16,
    pub user: String,
    pub host_key: String,
    pub command: String,
    pub timeout_s: u64,
    pub max_output_bytes: u64,
}

/// A normalized `network` action: a tunnel (`CONNECT host:port`) or a plain-HTTP request to a
/// host the sandbox of `vault run` may not reach without a card (docs/design.md §8). It uses no
/// credential. `host` is lower case (an IPv6 address without brackets).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormalizedNetwork {
    pub host: String,
    pub port: u16,
}

/// What an action will do, as hashed: `{"kind": "http", …}`, `{"kind": "ssh", …}` or
/// `{"kind": "network", …}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum NormalizedAction {
    Http(NormalizedHttp),
    Ssh(NormalizedSsh),
    Network(NormalizedNetwork),
}

impl NormalizedAction {
    /// The credential it uses (a network action uses none).
    pub fn credential(&self) -> Option<&CredentialRef> {
        match self {
            NormalizedAction::Http(h) => Some(&h.credential),
            NormalizedAction::Ssh(s) => Some(&s.credential),
            NormalizedAction::Network(_) => None,
        }
    }

    /// The blake3 hex a body must hash to: `Some(None)` for an HTTP request without a body,
    /// `None` for an action that has no body at all (SSH).
    pub fn body_blake3(&self) -> Option<Option<&str>> {
        match self {
            NormalizedAction::Http(h) => Some(h.body_blake3.as_deref()),
            NormalizedAction::Ssh(_) | NormalizedAction::Network(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tag_is_kind_and_unknown_fields_are_refused() {
        let text = r#"{"body_blake3":null,"credential":{"id":"cred_1","name":"api","profile":"default","version":2},"headers":[["accept","x"]],"kind":"http","max_output_bytes":65536,"method":"GET","timeout_s":30,"url":"https://h/"}"#;
        let n: NormalizedAction = serde_json::from_str(text).unwrap();
        assert_eq!(n.credential().unwrap().version, 2);
        assert_eq!(n.body_blake3(), Some(None));
        let back = serde_json::to_value(&n).unwrap();
        assert_eq!(
            back,
            serde_json::from_str::<serde_json::Value>(text).unwrap()
        );
        let extra = text.replace(r#""kind":"http""#, r#""kind":"http","method2":"DELETE""#);
        assert!(serde_json::from_str::<NormalizedAction>(&extra).is_err());
        let other = text.replace(r#""kind":"http""#, r#""kind":"ftp""#);
        assert!(serde_json::from_str::<NormalizedAction>(&other).is_err());
    }
}
