//! The network guard: after resolving, which addresses a credentialed request may reach (an IPv6
//! address that embeds an IPv4 one, such as NAT64, counts as that IPv4 address).
//! Link-local and cloud-metadata addresses never; loopback, private and CGNAT ranges only when
//! the credential's own host names such an address. The checked addresses are then the only ones
//! the connection may use (a pinned resolver), so DNS rebinding cannot swap them.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

/// Why no address was acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    #[error("cannot resolve {0}")]
    Resolve(String),
    #[error("{host} resolves to {addr}, which a credentialed request may not reach ({why})")]
    Forbidden {
        host: String,
        addr: IpAddr,
        why: &'static str,
    },
}

/// The address class of an IP. An IPv6 address that carries an IPv4 address (IPv4-mapped,
/// IPv4-compatible, NAT64 `64:ff9b::/96` and `64:ff9b:1::/48`, 6to4 `2002::/16`) is classed by
/// the IPv4 address it reaches; where the embedding is ambiguous, by the stricter reading.
pub fn classify(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => {
            let embedded = embedded_v4(v6);
            if embedded.is_empty() {
                return classify_v6(v6);
            }
            embedded
                .into_iter()
                .map(classify_v4)
                .min_by_key(|class| strictness(*class))
                .flatten()
        }
    }
}

/// Lower is stricter: never reachable, then reachable only when named, then public.
fn strictness(class: Option<&'static str>) -> u8 {
    match class {
        Some("link-local / cloud metadata" | "cloud metadata" | "not a unicast address") => 0,
        Some(_) => 1,
        None => 2,
    }
}

/// The IPv4 addresses an IPv6 address may stand for.
fn embedded_v4(ip: Ipv6Addr) -> Vec<Ipv4Addr> {
    let o = ip.octets();
    let s = ip.segments();
    let last32 = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    if let Some(v4) = ip.to_ipv4_mapped() {
        return vec![v4];
    }
    if crate::mutation::off("nat64") {
        return Vec::new();
    }
    match s {
        // NAT64 well-known prefix (RFC 6052): the last 32 bits.
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => vec![last32],
        // Local-use NAT64 (RFC 8215): a /96 inside it (last 32 bits) or the /48 layout of
        // RFC 6052 (bits 48-63 and 72-87, around the u octet).
        [0x64, 0xff9b, 1, ..] => vec![last32, Ipv4Addr::new(o[6], o[7], o[9], o[10])],
        // 6to4 (RFC 3056): bits 16-47.
        [0x2002, ..] => vec![Ipv4Addr::new(o[2], o[3], o[4], o[5])],
        // IPv4-compatible (deprecated ::a.b.c.d), but not :: and ::1.
        [0, 0, 0, 0, 0, 0, _, _] if u32::from(last32) > 1 => vec![last32],
        _ => Vec::new(),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    if ip.is_link_local() || o == [169, 254, 169, 254] {
        Some("link-local / cloud metadata")
    } else if o == [100, 100, 100, 200] || o == [192, 0, 0, 192] {
        Some("cloud metadata")
    } else if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() {
        Some("not a unicast address")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private network")
    } else if o[0] == 100 && (64..128).contains(&o[1]) {
        Some("carrier-grade NAT")
    } else {
        None
    }
}

fn classify_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if (s[0] & 0xffc0) == 0xfe80 || ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        Some("link-local / cloud metadata")
    } else if ip.is_unspecified() || ip.is_multicast() {
        Some("not a unicast address")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if (s[0] & 0xfe00) == 0xfc00 {
        Some("private network")
    } else {
        None
    }
}

/// Resolves `host:port` and keeps only the addresses this credential may reach.
/// `credential_host` is the host as the person wrote it when adding the credential.
pub fn resolve_checked(
    host: &str,
    port: u16,
    credential_host: &str,
) -> Result<Vec<SocketAddr>, GuardError> {
    let literal: Option<IpAddr> = credential_host.parse().ok();
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|_| GuardError::Resolve(host.to_owned()))?
        .collect();
    if addrs.is_empty() {
        return Err(GuardError::Resolve(host.to_owned()));
    }
    let mut ok = Vec::new();
    let mut first_refusal = None;
    for a in addrs {
        let why = classify(a.ip());
        let allowed = match why {
            None => true,
            Some("link-local / cloud metadata")
            | Some("cloud metadata")
            | Some("not a unicast address") => false,
            // Loopback / private / CGNAT: only when the person bound the credential to that very address
            // (or to `localhost` for loopback).
            Some(class) => {
                literal == Some(a.ip()) || (class == "loopback" && credential_host == "localhost")
            }
        };
        if allowed {
            ok.push(a);
        } else if first_refusal.is_none() {
            first_refusal = Some(GuardError::Forbidden {
                host: host.to_owned(),
                addr: a.ip(),
                why: why.unwrap_or(""),
            });
        }
    }
    if ok.is_empty() {
        return Err(first_refusal.unwrap_or_else(|| GuardError::Resolve(host.to_owned())));
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        for (ip, class) in [
            ("169.254.169.254", Some("link-local / cloud metadata")),
            ("fe80::1", Some("link-local / cloud metadata")),
            (
                "::ffff:169.254.169.254",
                Some("link-local / cloud metadata"),
            ),
            ("127.0.0.1", Some("loopback")),
            ("::1", Some("loopback")),
            ("10.1.2.3", Some("private network")),
            ("192.168.0.1", Some("private network")),
            ("100.64.0.1", Some("carrier-grade NAT")),
            ("fd12::1", Some("private network")),
            ("93.184.216.34", None),
            ("2606:4700::1111", None),
        ] {
            assert_eq!(classify(ip.parse().unwrap()), class, "{ip}");
        }
    }

    #[test]
    fn nat64_6to4_and_compatible_addresses_are_their_ipv4_address() {
        for (ip, class) in [
            ("64:ff9b::a9fe:a9fe", Some("link-local / cloud metadata")),
            ("64:ff9b::7f00:1", Some("loopback")),
            ("64:ff9b::a00:1", Some("private network")),
            ("64:ff9b::5db8:d822", None),
            ("64:ff9b:1::a9fe:a9fe", Some("link-local / cloud metadata")),
            (
                "64:ff9b:1:a9fe:a9:fe00:0:5db8",
                Some("link-local / cloud metadata"),
            ),
            ("2002:a9fe:a9fe::1", Some("link-local / cloud metadata")),
            ("::a9fe:a9fe", Some("link-local / cloud metadata")),
            ("::1", Some("loopback")),
        ] {
            assert_eq!(classify(ip.parse().unwrap()), class, "{ip}");
        }
        assert!(matches!(
            resolve_checked("64:ff9b::a9fe:a9fe", 443, "64:ff9b::a9fe:a9fe"),
            Err(GuardError::Forbidden { .. })
        ));
    }

    #[test]
    fn loopback_only_for_a_loopback_credential_and_metadata_never() {
        assert!(resolve_checked("127.0.0.1", 80, "127.0.0.1").is_ok());
        assert!(resolve_checked("127.0.0.1", 80, "api.example.com").is_err());
        assert!(resolve_checked("localhost", 80, "localhost").is_ok());
        assert!(matches!(
            resolve_checked("169.254.169.254", 80, "169.254.169.254"),
            Err(GuardError::Forbidden { .. })
        ));
    }
}
