//! `vault run`'s network session in the agent (docs/design.md §8): a host its proxy asks for
//! (`connect`) becomes a `network` action of that session, waits for the person's card like any
//! action (pushed, never polled; withdrawn when the proxy goes away; answered when the agent
//! stops), and is answered once dispatched (the proxy opens the connection) or final (refused,
//! with why). What the connection carried is recorded when the proxy says it closed
//! (`tunneled`). A paused vault refuses at once.
use super::authority::Authority;
use super::ops;
use super::tools::{wait_for, Env, EventSink, Session, Waited, MAX_WAITING_PER_SESSION};
use crate::approvals::{self, NetworkAsk, State, Submitted};
use crate::credentials::{self, Target};
use crate::policy::HttpArgs;
use crate::wire::protocol::{ErrorCode, Interception, RelayedFile, Reply};
use crate::wire::{Outcome, Secret};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// A host as the proxy names it: a DNS name or an IP address (IPv6 without brackets), lower
/// case, at most 253 bytes.
fn valid_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.:_".contains(&b))
}

/// `Connect`: the host waits as a `network` action until the person decides, it expires, the
/// proxy goes away, or the agent stops. The reply is the action: `dispatched` means open it.
pub(crate) async fn connect(
    env: Arc<Env>,
    ses: Arc<Session>,
    host: String,
    port: u16,
    events: Arc<dyn EventSink>,
    cancel: watch::Receiver<bool>,
) -> Reply {
    if !valid_host(&host) || port == 0 {
        let why = format!("{host:?}:{port} is not a host and port the proxy could have asked for");
        return ops::error(ErrorCode::Invalid, why);
    }
    if ses.waiting.load(Ordering::SeqCst) >= MAX_WAITING_PER_SESSION {
        let why = format!(
            "this session already has {MAX_WAITING_PER_SESSION} hosts waiting for a person"
        );
        return ops::error(ErrorCode::Limit, why);
    }
    let (trust, ses2, expiry) = (env.trust.clone(), ses.clone(), env.config.expiry());
    let submitted = env
        .db
        .run(move |s| {
            match approvals::paused(s.conn()) {
                Ok(None) => {}
                Ok(Some(why)) => {
                    return Err((ErrorCode::Paused, format!("the vault is paused: {why}")))
                }
                Err(_) => {
                    return Err((
                        ErrorCode::Internal,
                        "the pause switch cannot be read; nothing runs".into(),
                    ))
                }
            }
            let ask = NetworkAsk {
                session_id: &ses2.id,
                client: &ses2.client.name,
                profile: &ses2.profile,
                host: &host,
                port,
                expiry,
            };
            approvals::submit_network(s, &trust, ask)
                .map_err(|e| (ErrorCode::Internal, e.to_string()))
        })
        .await;
    let action = match submitted {
        Ok(Ok(Submitted::Created(a) | Submitted::Existing(a) | Submitted::Replayed(a))) => a,
        Ok(Err((code, why))) => return ops::error(code, why),
        Err(_) => return ops::error(ErrorCode::Internal, "the vault agent is stopping".into()),
    };
    // Until it expires (the expiry is the card's, and lands within the second after).
    let wait = expiry + Duration::from_secs(1);
    match wait_for(&env, &ses, action, wait, events, cancel, true).await {
        Waited::Done(a) | Waited::Stopped(a, _) => Reply::Action(a),
        Waited::Cancelled => Reply::Cancelled,
    }
}

/// `Tunneled`: the connection of this session's dispatched network action closed, having
/// carried `sent` bytes out and `received` back. With an error and nothing sent it failed before
/// sending; otherwise it completed (the error, if any, in its result).
pub(crate) async fn tunneled(
    env: &Arc<Env>,
    ses: Option<&Session>,
    action_id: &str,
    (sent, received): (u64, u64),
    error: Option<String>,
) -> Reply {
    let Some(ses) = ses else {
        return ops::error(ErrorCode::Protocol, "no network session".into());
    };
    let (sid, id) = (ses.id.clone(), action_id.to_owned());
    let done = env
        .db
        .run_unsynced(move |s| {
            let a = approvals::get(s, &sid, &id).map_err(|e| e.to_string())?;
            if a.tool != approvals::NETWORK || a.state != State::Dispatched {
                return Err(format!(
                    "{id} is not a dispatched network action of this session"
                ));
            }
            let error: Option<String> = error.map(|e| e.chars().take(200).collect());
            let outcome = Outcome {
                state: if error.is_some() && sent == 0 {
                    State::FailedBeforeSend
                } else {
                    State::Completed
                },
                result: json!({"network": {"sent": sent, "received": received, "error": error}}),
                reason: error,
            };
            approvals::finish(s, &id, &outcome).map_err(|e| e.to_string())
        })
        .await;
    match done {
        Ok(Ok(_)) => Reply::Ok,
        Ok(Err(why)) => ops::error(ErrorCode::Invalid, why),
        Err(_) => ops::error(ErrorCode::Internal, "the vault agent is stopping".into()),
    }
}

/// `Intercept`: the bound host of `credential` (an `https://` one of the session's profile) and
/// a leaf for it from the vault's CA.
pub(crate) async fn intercept(env: &Arc<Env>, ses: Option<&Session>, credential: String) -> Reply {
    let Some(ses) = ses else {
        return ops::error(ErrorCode::Protocol, "no network session".into());
    };
    let (profile, vault_id) = (ses.profile.clone(), env.trust.vault_id.clone());
    let done = env
        .db
        .run(move |s| {
            let cred = credentials::get(s, &profile, &credential).map_err(|e| {
                let why = format!("`vault run --env …={credential}`: {e}");
                (ErrorCode::NotFound, why)
            })?;
            let Target::Http(t) = &cred.target else {
                let why = format!("`vault run --env …={credential}`: {credential} is an SSH credential; only an HTTP credential's placeholder is swapped");
                return Err((ErrorCode::Invalid, why));
            };
            if t.scheme != "https" {
                let why = format!("`vault run --env …={credential}`: {credential} is bound to http://{}:{}; the proxy swaps a placeholder only inside TLS to an https:// binding", t.host, t.port);
                return Err((ErrorCode::Invalid, why));
            }
            let ca = Authority::of(s, &vault_id).map_err(|e| (ErrorCode::Internal, e.to_string()))?;
            Ok((ca, t.host.clone(), t.port))
        })
        .await;
    // The leaf is signed here, off the writer's thread.
    let (ca, host, port) = match done {
        Ok(Ok(found)) => found,
        Ok(Err((code, why))) => return ops::error(code, why),
        Err(_) => return ops::error(ErrorCode::Internal, "the vault agent is stopping".into()),
    };
    match ca.leaf_for(&host) {
        Ok(leaf) => Reply::Intercept(Interception {
            host,
            port,
            ca_pem: leaf.ca_pem,
            cert_pem: leaf.cert_pem,
            key_pem: Secret::new(leaf.key_pem.as_bytes().to_vec()),
        }),
        Err(e) => ops::error(ErrorCode::Internal, e.to_string()),
    }
}

/// A `Swap`'s fields as the `http_request` arguments the proxy stands for: its body, any bytes,
/// as `body_bytes` (which no JSON spells). `Err`: the body is not base64.
pub(crate) fn swap_args(
    credential: String,
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body_base64: Option<String>,
) -> Result<HttpArgs, String> {
    use base64::Engine;
    let body_bytes = body_base64
        .map(|b| base64::engine::general_purpose::STANDARD.decode(b))
        .transpose()
        .map_err(|_| "the swapped request's body_base64 is not base64".to_owned())?;
    Ok(HttpArgs {
        credential,
        method,
        url,
        headers: headers.into_iter().collect(),
        body_bytes,
        ..Default::default()
    })
}

/// `Swap`: the request as an `http_request` of this session (`HttpArgs::proxied`), gated like
/// one and waited on until final or its card expires. The reply is the action (its result's
/// `proxied` holds the response), or the tool's refusal when it never became one.
pub(crate) async fn swap(
    env: Arc<Env>,
    ses: Arc<Session>,
    mut args: HttpArgs,
    body_file: Option<RelayedFile>,
    events: Arc<dyn EventSink>,
    cancel: watch::Receiver<bool>,
) -> Reply {
    if let Some(file) = body_file {
        let taken = match args.body_bytes {
            Some(_) => Err("a swapped request's body given both in the frame and in a file".into()),
            None => {
                let dir = env.paths.relayed();
                tokio::task::spawn_blocking(move || relayed_request_body(&dir, &file))
                    .await
                    .unwrap_or_else(|_| Err("reading the request body's file failed".into()))
            }
        };
        match taken {
            Ok(body) => args.body_bytes = Some(body),
            Err(why) => return ops::error(ErrorCode::Invalid, why),
        }
    }
    match super::tools::proxied(&env, &ses, args, events, cancel).await {
        Ok(Some(action)) => Reply::Action(action),
        Ok(None) => Reply::Cancelled,
        Err(refused) => Reply::Tool(refused),
    }
}

/// The body the proxy wrote to `file` in `dir` (`<vault>/relayed`), held to the length and
/// blake3 its `swap` gave, at most a proxied body's bound; the file is removed as it is taken.
fn relayed_request_body(dir: &std::path::Path, file: &RelayedFile) -> Result<Vec<u8>, String> {
    let path = crate::exec::relayed::relayed_request(dir, &file.name)?;
    crate::exec::relayed::take(
        &path,
        file.bytes,
        &file.blake3,
        crate::policy::PROXIED_BODY_MAX_BYTES as u64,
        "the request body",
    )
}

#[cfg(test)]
mod tests {
    use super::{swap_args, valid_host};

    #[test]
    fn a_swapped_body_is_bytes_and_must_be_base64() {
        let args = |b: Option<&str>| {
            swap_args(
                "api".into(),
                "POST".into(),
                "https://h/".into(),
                vec![],
                b.map(Into::into),
            )
        };
        assert_eq!(
            args(Some("AJ+SlgA=")).unwrap().body_bytes,
            Some(vec![0, 159, 146, 150, 0])
        );
        assert_eq!(args(None).unwrap().body_bytes, None);
        assert!(args(Some("not base64!"))
            .unwrap_err()
            .contains("not base64"));
    }

    #[test]
    fn a_host_is_a_name_or_an_address_and_nothing_else() {
        for ok in [
            "example.org",
            "127.0.0.1",
            "::1",
            "xn--bcher-kva.example",
            "a_b.internal",
        ] {
            assert!(valid_host(ok), "{ok}");
        }
        for bad in [
            "",
            "Example.org",
            "[::1]",
            "h/x",
            "h x",
            "h\r\nX: y",
            &"a".repeat(254),
        ] {
            assert!(!valid_host(bad), "{bad:?}");
        }
    }
}
