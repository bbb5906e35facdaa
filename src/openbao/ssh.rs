//! The SSH secrets engine as a CA (`MOUNT/sign/ROLE`: a user certificate for a public key), and
//! the server's seal status (`sys/seal-status`, which needs no token).

use super::{api_path, parse, Call, Client, Error, Token};
use serde::Deserialize;
use std::time::Duration;

/// A user certificate OpenBao's SSH CA signed. Neither field is secret: the private key never
/// leaves the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedCert {
    /// One OpenSSH line: `ssh-ed25519-cert-v01@openssh.com AAAA…`.
    pub certificate: String,
    /// The serial OpenBao gave it (hex), as its audit log and `ssh-keygen -L` show it.
    pub serial: String,
}

/// `sys/seal-status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealStatus {
    pub sealed: bool,
    pub initialized: bool,
    pub version: String,
}

impl Client {
    /// Has the SSH CA at `MOUNT` sign `public_key` (an OpenSSH public key line) under `role` as
    /// a user certificate for `principals`, valid for `ttl` (the role's max TTL caps it).
    pub fn ssh_sign(
        &self,
        token: &Token,
        mount: &str,
        role: &str,
        public_key: &str,
        principals: &[&str],
        ttl: Duration,
    ) -> Result<SignedCert, Error> {
        #[derive(serde::Serialize)]
        struct Body<'a> {
            public_key: &'a str,
            valid_principals: String,
            ttl: String,
            cert_type: &'static str,
        }
        #[derive(Deserialize)]
        struct Signed {
            data: Data,
        }
        #[derive(Deserialize)]
        struct Data {
            signed_key: String,
            serial_number: String,
        }
        let api = api_path(mount, Some("sign"), role)?;
        let call = Call {
            method: "POST",
            path: &api,
            secrets: &[token.expose_secret()],
        };
        let body = serde_json::to_vec(&Body {
            public_key: public_key.trim(),
            valid_principals: principals.join(","),
            ttl: format!("{}s", ttl.as_secs().max(1)),
            cert_type: "user",
        })
        .expect("strings serialize");
        let body = self
            .send(&call, Some(token), None, Some(&body))?
            .ok(self, &call)?;
        let d = parse::<Signed>(&body, &api)?.data;
        let certificate = d.signed_key.trim().to_owned();
        if !certificate.contains("-cert-v01@openssh.com ") {
            return Err(Error::Unexpected {
                path: api,
                what: "`signed_key` is not an OpenSSH certificate".to_owned(),
            });
        }
        Ok(SignedCert {
            certificate,
            serial: d.serial_number,
        })
    }

    /// Whether the server is sealed (no token needed; a sealed server still answers this).
    pub fn seal_status(&self) -> Result<SealStatus, Error> {
        #[derive(Deserialize)]
        struct Body {
            sealed: bool,
            initialized: bool,
            #[serde(default)]
            version: String,
        }
        let path = "sys/seal-status";
        let call = Call {
            method: "GET",
            path,
            secrets: &[],
        };
        let body = self.send(&call, None, None, None)?.ok(self, &call)?;
        let b = parse::<Body>(&body, path)?;
        Ok(SealStatus {
            sealed: b.sealed,
            initialized: b.initialized,
            version: b.version,
        })
    }
}
