//! Unit tests of what each refusal says and of the bounds as documented: written against the
//! survivors of `cargo mutants` on `src/policy` (issue 49), each seen red with its mutant.
use super::tests::{get, http_cred, ssh_args, ssh_cred};
use super::*;
use crate::credentials::{Approval, HttpAuth};

/// Each refusal of a path says its own reason: an escaped prefix is outside the prefix (the
/// path as written is what is sent), and a dot segment hidden behind an escaped `/` is named as
/// a dot segment.
#[test]
fn each_path_refusal_names_its_own_reason() {
    let c = http_cred("api.example.com", 443, "/v1/", HttpAuth::Bearer);
    let refusal =
        |path: &str| validate_http(&c, get(&format!("https://api.example.com{path}"))).unwrap_err();
    let outside = refusal("/v%31/x");
    assert!(
        matches!(&outside, PolicyError::Denied { reason, .. } if reason.contains("outside the credential's prefix")),
        "{outside:?}"
    );
    for path in ["/v1/..%2fx", "/v1/.%2Fx", "/v1/x/%2e%2e%2f"] {
        let e = refusal(path);
        assert!(
            format!("{e:?}").contains(". or .. segments"),
            "{path}: {e:?}"
        );
    }
}

/// A URL with no path at all is the host's root, `/`, and passes under the prefix `/`.
#[test]
fn a_url_without_a_path_is_the_root() {
    let c = http_cred("api.example.com", 443, "/", HttpAuth::Bearer);
    let ValidatedRequest::Http(r) = validate_http(&c, get("https://api.example.com")).unwrap()
    else {
        panic!()
    };
    assert_eq!(r.url, "https://api.example.com/");
}

/// An IPv6 target is named in brackets, in the refusal and in its fix, as a URL spells it.
#[test]
fn an_ipv6_target_is_named_in_brackets() {
    let c = http_cred("::1", 8443, "/", HttpAuth::Bearer);
    match validate_http(&c, get("https://[::1]:9/x")).unwrap_err() {
        PolicyError::Denied { reason, fix } => {
            assert!(
                reason
                    .contains("https://[::1]:9 is not the credential's target https://[::1]:8443"),
                "{reason}"
            );
            assert!(fix.contains("https://[::1]:8443/"), "{fix}");
        }
        e => panic!("{e:?}"),
    }
}

/// The bounds docs/design.md states, held through `validate_http` in bytes as written there: a
/// body of 1 MiB, `max_output_bytes` from 1 to 1 MiB (64 KiB when not given), and a proxied
/// response of 256 MiB.
#[test]
fn the_bounds_are_the_documented_ones() {
    let mut c = http_cred("api.example.com", 443, "/", HttpAuth::Bearer);
    c.approval = Approval::Never;
    let post = |len: usize, proxied: bool| HttpArgs {
        method: "POST".into(),
        body: (!proxied).then(|| "a".repeat(len)),
        body_bytes: proxied.then(|| vec![b'a'; len]),
        proxied,
        ..get("https://api.example.com/x")
    };
    let output = |r: Result<ValidatedRequest, PolicyError>| match r.unwrap() {
        ValidatedRequest::Http(h) => h.max_output_bytes,
        _ => panic!(),
    };
    assert!(validate_http(&c, post(1_048_576, false)).is_ok());
    assert!(validate_http(&c, post(1_048_577, false)).is_err());
    assert!(validate_http(&c, post(67_108_864, true)).is_ok());
    assert!(validate_http(&c, post(67_108_865, true)).is_err());
    assert_eq!(output(validate_http(&c, post(1, true))), 268_435_456);
    assert_eq!(
        output(validate_http(&c, get("https://api.example.com/x"))),
        65_536
    );
    let with_output = |n: u64| HttpArgs {
        max_output_bytes: Some(n),
        ..get("https://api.example.com/x")
    };
    assert_eq!(output(validate_http(&c, with_output(1_048_576))), 1_048_576);
    assert!(validate_http(&c, with_output(1_048_577)).is_err());
    assert!(validate_http(&c, with_output(0)).is_err());
}

/// A body must fit the card whole (16 KiB as shown) wherever a card may be needed: every
/// request of an `each` credential, and the writes of a `writes` one; exactly at the bound it
/// fits.
#[test]
fn a_body_must_fit_the_card_wherever_one_may_be_needed() {
    let mut c = http_cred("api.example.com", 443, "/", HttpAuth::Bearer);
    let post = |len: usize| HttpArgs {
        method: "POST".into(),
        body: Some("a".repeat(len)),
        ..get("https://api.example.com/x")
    };
    assert!(validate_http(&c, post(16_384)).is_ok());
    assert!(validate_http(&c, post(16_385)).is_err());
    c.approval = Approval::Writes;
    let e = validate_http(&c, post(16_385)).unwrap_err();
    assert!(format!("{e:?}").contains("approval card"), "{e:?}");
    c.approval = Approval::Never;
    assert!(validate_http(&c, post(16_385)).is_ok());
}

/// What the approver reads of a request (`summary`), and a refusal's fix, are the request's and
/// the refusal's own.
#[test]
fn the_summary_and_the_fix_say_what_they_are_about() {
    let c = http_cred("api.example.com", 443, "/v1/", HttpAuth::Bearer);
    let mut a = get("https://api.example.com/v1/items");
    a.method = "POST".into();
    let mut r = validate_http(&c, a).unwrap();
    assert_eq!(
        r.summary("example"),
        "POST https://api.example.com/v1/items (credential example)"
    );
    r.set_secret_version(Some(7));
    assert_eq!(
        r.summary("example"),
        "POST https://api.example.com/v1/items (credential example, OpenBao secret version 7)"
    );
    let ssh = validate_ssh(&ssh_cred(&[]), ssh_args("uptime")).unwrap();
    assert_eq!(
        ssh.summary("box"),
        "ssh deploy@10.0.0.5:22 `uptime` (credential box)"
    );
    let e = validate_http(&c, get("https://api.example.com/v2/items")).unwrap_err();
    assert_eq!(e.fix(), "use a URL under https://api.example.com:443/v1/");
}
