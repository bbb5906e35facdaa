//! The HTTP executor's TLS clients: one per set of roots (a credential's CA file, as its bytes
//! read at each call, or the platform's verifier), kept for the life of the process. Each
//! credential version gets a client of its own, with its own pinned addresses (`kept.rs`); the
//! TLS client configuration is shared across them: its roots are loaded once (the platform's
//! are read from disk the first time they verify), and its session cache lets a later handshake
//! with the same host resume (TLS 1.3, the server proven by the handshake that made the
//! session). No client certificate is ever configured here; a key that adds one must add it to
//! the cache's key, and to `kept::Key`.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use ureq::tls::{PemItem, RootCerts, TlsConfig};
use ureq::unversioned::transport::{ConnectionDetails, Connector, RustlsConnector, Transport};

/// More sets of roots than this in one process: the cache starts again (each is a few KiB).
const MAX_ROOT_SETS: usize = 64;

/// The TLS clients of the process, by the blake3 of their roots.
#[derive(Debug, Default)]
pub(super) struct TlsClients {
    by_roots: Mutex<HashMap<[u8; 32], Shared>>,
}

/// One set of roots: the `TlsConfig` a request's agent is built with, and the connector (with
/// the rustls configuration it builds once from it) that every such agent shares.
#[derive(Debug, Clone)]
pub(super) struct Shared {
    pub(super) config: TlsConfig,
    /// The blake3 of the roots: part of a kept connection's key (`kept::Key`).
    pub(super) roots_key: [u8; 32],
    tls: Arc<RustlsConnector>,
}

impl TlsClients {
    /// The client for `ca_file`'s roots (its bytes now), or the platform's when there is none.
    pub(super) fn roots(&self, ca_file: Option<&str>) -> Result<Shared, String> {
        let pem = match ca_file {
            Some(ca) => Some(
                std::fs::read(ca)
                    .map_err(|e| format!("cannot read the credential's CA file {ca}: {e}"))?,
            ),
            None => None,
        };
        let key = match &pem {
            Some(p) => *blake3::Hasher::new()
                .update(b"ca:")
                .update(p)
                .finalize()
                .as_bytes(),
            None => *blake3::hash(b"platform").as_bytes(),
        };
        let mut by_roots = self.by_roots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = by_roots.get(&key) {
            return Ok(found.clone());
        }
        if by_roots.len() >= MAX_ROOT_SETS {
            by_roots.clear();
        }
        let shared = Shared {
            config: config_of(pem.as_deref()),
            roots_key: key,
            tls: Arc::new(RustlsConnector::default()),
        };
        by_roots.insert(key, shared.clone());
        Ok(shared)
    }
}

/// The roots of `pem` (its certificates), else the platform's verifier.
fn config_of(pem: Option<&[u8]>) -> TlsConfig {
    let tls = TlsConfig::builder();
    let Some(pem) = pem else {
        return tls.root_certs(RootCerts::PlatformVerifier).build();
    };
    let certs: Vec<_> = ureq::tls::parse_pem(pem)
        .filter_map(Result::ok)
        .filter_map(|item| match item {
            PemItem::Certificate(c) => Some(c),
            _ => None,
        })
        .collect();
    tls.root_certs(RootCerts::new_with_certs(&certs)).build()
}

impl<In: Transport> Connector<In> for Shared {
    type Out = <RustlsConnector as Connector<In>>::Out;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        self.tls.connect(details, chained)
    }
}

#[cfg(test)]
mod tests {
    use super::TlsClients;
    use std::sync::Arc;

    #[test]
    fn one_client_per_set_of_roots_and_a_changed_file_is_a_new_one() {
        let dir = std::env::temp_dir().join(format!("av-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(
            &ca,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let ca = ca.to_str().unwrap();
        let clients = TlsClients::default();
        let (a, b) = (
            clients.roots(Some(ca)).unwrap(),
            clients.roots(Some(ca)).unwrap(),
        );
        assert!(Arc::ptr_eq(&a.tls, &b.tls), "the same roots share a client");
        let platform = clients.roots(None).unwrap();
        assert!(!Arc::ptr_eq(&a.tls, &platform.tls));
        std::fs::write(ca, "").unwrap();
        let changed = clients.roots(Some(ca)).unwrap();
        assert!(
            !Arc::ptr_eq(&a.tls, &changed.tls),
            "an edited CA file is new roots"
        );
        let missing = dir.join("gone.pem");
        let err = clients.roots(Some(missing.to_str().unwrap())).unwrap_err();
        assert!(
            err.contains("cannot read the credential's CA file"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
