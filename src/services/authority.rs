//! The vault's own certificate authority for `vault run`'s proxy (docs/design.md §8, issue 47):
//! made on first use, its key kept in the encrypted database (`meta`) and never written out or
//! sent. Only its certificate leaves the agent, into the trust bundle of the sandbox (nothing
//! outside trusts it). It signs one kind of thing: a leaf for the bound host of a credential the
//! person named with `vault run --env`, valid for two days, no CA itself, for TLS servers only.
use crate::store::{get_meta, set_meta, Store, StoreError};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

/// Where the CA is kept.
const META: &str = "proxy_ca";

/// The CA as kept: the name it was made with (its subject, which each leaf names as issuer),
/// its certificate, and its key.
#[derive(Serialize, Deserialize)]
pub(crate) struct Authority {
    name: String,
    cert_pem: String,
    key_pem: Zeroizing<String>,
}

/// A leaf for one host, and the CA certificate that signed it.
pub(crate) struct Leaf {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: Zeroizing<String>,
}

/// Why no leaf was made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AuthorityError {
    #[error("the vault's proxy CA cannot be read or kept: {0}")]
    Store(#[from] StoreError),
    #[error("the vault's proxy CA cannot sign a certificate for {host}: {why}")]
    Sign { host: String, why: String },
}

/// The CA's parameters: the same each time for the same name, so a leaf signed later names
/// exactly the subject (and key identifier) of the certificate kept.
fn ca_params(name: &str) -> CertificateParams {
    let mut p = CertificateParams::default();
    p.distinguished_name.push(DnType::CommonName, name);
    p.distinguished_name
        .push(DnType::OrganizationName, "agent-vault");
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    p
}

impl Authority {
    /// The vault's CA: read from `meta`, or made and kept there if there is none yet (a write
    /// transaction only then).
    pub(crate) fn of(store: &mut Store, vault_id: &str) -> Result<Self, AuthorityError> {
        let read = |text: String| {
            serde_json::from_str::<Self>(&text)
                .map_err(|_| StoreError::Damaged("the proxy CA in meta does not read").into())
        };
        if let Some(text) = get_meta(store.conn(), META)? {
            return read(text);
        }
        let tx = store.write()?;
        // Another job may have made it in between.
        if let Some(text) = get_meta(&tx, META)? {
            return read(text);
        }
        let name = format!("agent-vault proxy CA {vault_id}");
        let sign = |why: rcgen::Error| AuthorityError::Sign {
            host: "itself".into(),
            why: why.to_string(),
        };
        let key = KeyPair::generate().map_err(sign)?;
        let mut p = ca_params(&name);
        valid_for(&mut p, 3650);
        let cert = p.self_signed(&key).map_err(sign)?;
        let ca = Self {
            name,
            cert_pem: cert.pem(),
            key_pem: Zeroizing::new(key.serialize_pem()),
        };
        let text = Zeroizing::new(serde_json::to_string(&ca).expect("JSON"));
        set_meta(&tx, META, &text)?;
        tx.commit()?;
        Ok(ca)
    }

    /// A leaf for `host` (a DNS name or an IP address), signed by this CA.
    pub(crate) fn leaf_for(&self, host: &str) -> Result<Leaf, AuthorityError> {
        let sign = |why: rcgen::Error| AuthorityError::Sign {
            host: host.to_owned(),
            why: why.to_string(),
        };
        let ca_key = KeyPair::from_pem(&self.key_pem).map_err(sign)?;
        let issuer = Issuer::new(ca_params(&self.name), ca_key);
        let key = KeyPair::generate().map_err(sign)?;
        let mut p = CertificateParams::new(vec![host.to_owned()]).map_err(sign)?;
        p.distinguished_name.push(DnType::CommonName, host);
        p.is_ca = IsCa::ExplicitNoCa;
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        p.use_authority_key_identifier_extension = true;
        valid_for(&mut p, 2);
        let cert = p.signed_by(&key, &issuer).map_err(sign)?;
        Ok(Leaf {
            ca_pem: self.cert_pem.clone(),
            cert_pem: cert.pem(),
            key_pem: Zeroizing::new(key.serialize_pem()),
        })
    }
}

/// Sets `p`'s validity: from yesterday (a clock a little behind still accepts it) to `days`
/// from today, UTC.
fn valid_for(p: &mut CertificateParams, days: i64) {
    let on = |offset: i64| {
        let d = jiff::tz::Offset::UTC
            .to_datetime(jiff::Timestamp::now())
            .date()
            .checked_add(jiff::Span::new().days(offset))
            .expect("a date within range");
        rcgen::date_time_ymd(i32::from(d.year()), d.month() as u8, d.day() as u8)
    };
    p.not_before = on(-1);
    p.not_after = on(days);
}
