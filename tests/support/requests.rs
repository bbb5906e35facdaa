//! One well-formed request of every kind the agent's protocol defines, enumerated from the type
//! (`RequestKind::all`), for tests that send each one where it must be refused. The match is
//! exhaustive: a kind added to `Request` does not compile here until it has a sample, and
//! `every_kind` checks that each sample decodes as the kind it stands for (a sample the agent
//! could not even decode would prove nothing about the gate behind the decoder).
use agent_vault::agent::protocol::{Request, RequestKind};
use serde_json::{json, Value};

/// What a contained client would put in the place of a person's decision or signature.
const SIG: &str = "00";

fn signed() -> Value {
    json!({"payload": "e30=", "signature": SIG})
}

/// A request of `kind`, as JSON (the `req` of a client frame). `path`: where an export would
/// be written, so a test can look for it from outside.
pub fn sample(kind: RequestKind, path: &str) -> Value {
    use RequestKind as K;
    let http = json!({"kind": "http", "scheme": "https", "host": "planted.example", "port": 443,
        "path_prefix": "/", "methods": null, "auth": {"type": "bearer"}});
    match kind {
        K::Hello => json!({"op": "hello", "v": 7, "role": "mcp"}),
        K::Contained => json!({"op": "contained", "pid": 1}),
        K::Tool => json!({"op": "tool", "name": "list_credentials", "args": {}}),
        K::Cancel => json!({"op": "cancel", "call": 999}),
        K::Connect => json!({"op": "connect", "host": "planted.example", "port": 443}),
        K::Tunneled => json!({"op": "tunneled", "action_id": "act_0", "sent": 0,
            "received": 0, "error": null}),
        K::Intercept => json!({"op": "intercept", "credential": "api"}),
        K::Swap => json!({"op": "swap", "credential": "api", "method": "GET",
            "url": "https://planted.example/", "headers": [], "body_base64": null}),
        K::Reject => json!({"op": "reject", "code": -32600, "reason": "sample",
            "fingerprint": "00", "tool": null}),
        K::End => json!({"op": "end", "reason": "sample"}),
        K::Status => json!({"op": "status"}),
        K::Ping => json!({"op": "ping"}),
        K::Lock => json!({"op": "lock"}),
        K::Credentials => json!({"op": "credentials", "profile": null}),
        K::AddCredential => json!({"op": "add_credential", "new": {"id": "cred_planted",
            "profile": "default", "name": "planted", "approval": "never", "target": http,
            "secret": "41"}, "signature": SIG}),
        K::EditCredential => json!({"op": "edit_credential", "profile": "default",
            "name": "api", "version": 1, "edit": {"approval": "never"}, "signature": SIG}),
        K::RemoveCredential => json!({"op": "remove_credential", "profile": "default",
            "name": "api", "removal": signed()}),
        K::Pending => json!({"op": "pending"}),
        K::WatchPending => json!({"op": "watch_pending"}),
        K::ForApproval => json!({"op": "for_approval", "action_id": "act_0"}),
        K::Decide => json!({"op": "decide", "decision": {"decision": signed(), "grant": null},
            "pin": "31323334"}),
        K::SetPin => json!({"op": "set_pin", "request": signed(), "pin": "31323334"}),
        K::Pause => json!({"op": "pause", "reason": "planted from inside"}),
        K::Resume => json!({"op": "resume", "resume": signed()}),
        K::OpenBaoLogin => json!({"op": "openbao_login", "request": signed(), "secret": "41"}),
        K::OpenBaoLogout => json!({"op": "openbao_logout", "request": signed()}),
        K::OpenBaoStatus => json!({"op": "openbao_status"}),
        K::OpenBaoHead => json!({"op": "openbao_head"}),
        K::ApproverKeys => json!({"op": "approver_keys"}),
        K::AddApproverKey => json!({"op": "approver_add_key", "request": signed()}),
        K::RemoveApproverKey => json!({"op": "approver_remove_key", "request": signed()}),
        K::SetAllowedHosts => json!({"op": "set_allowed_hosts", "request": signed()}),
        K::AllowedHosts => json!({"op": "allowed_hosts"}),
        K::Grants => json!({"op": "grants"}),
        K::RevokeGrants => json!({"op": "revoke_grants", "revoke": signed()}),
        K::Journal => json!({"op": "journal", "after": 0, "limit": 1000, "wait_ms": 0}),
        K::Verify => json!({"op": "verify", "anchors": []}),
        K::Export => json!({"op": "export", "path": path}),
    }
}

/// Every kind with its sample, each checked to decode as that kind.
pub fn every_kind(path: &str) -> Vec<(RequestKind, Value)> {
    RequestKind::all()
        .map(|k| {
            let v = sample(k, path);
            let req: Request = serde_json::from_value(v.clone())
                .unwrap_or_else(|e| panic!("the sample of {k:?} does not decode: {e}: {v}"));
            assert_eq!(req.kind(), k, "the sample of {k:?} decodes as another kind");
            (k, v)
        })
        .collect()
}
