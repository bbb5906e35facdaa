//! The journal's row kinds and the body each kind carries. Writers append a body type (its kind
//! comes with it, `Body::kind`); readers match on `Kind` and parse the body type of that kind.
//! Bodies are read leniently (an older build's extra field is history, protected by the chain),
//! and written exactly as the hash covers them: a field that is `null` stays `null`, one that is
//! absent stays absent.
mod bodies;
mod kind;

pub use bodies::*;
pub use kind::{Body, Kind};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Approval, State, Target};
    use serde_json::json;

    #[test]
    fn every_kind_reads_back_and_nothing_else_does() {
        let all: Vec<Kind> = Kind::all().collect();
        assert_eq!(all.len(), 32);
        for k in &all {
            assert_eq!(Kind::parse(k.as_str()), Some(*k), "{k}");
        }
        for s in [
            "action.",
            "action.done",
            "vault",
            "x",
            "vault.init ",
            "Vault.init",
        ] {
            assert_eq!(Kind::parse(s), None, "{s}");
        }
        let distinct: std::collections::HashSet<_> = all.iter().map(|k| k.as_str()).collect();
        assert_eq!(distinct.len(), all.len());
    }

    #[test]
    fn a_basis_reads_back_as_what_it_was() {
        for text in [
            r#"{"decision":"dec_1","nonce":"n"}"#,
            r#"{"grant":"grt_1","grant_nonce":"n"}"#,
            r#"{"policy":"never"}"#,
            r#"{"policy":"writes"}"#,
        ] {
            let b: Basis = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&b).unwrap(), text);
        }
    }

    /// The typed bodies write the bytes the `json!` bodies of earlier builds wrote (absent stays
    /// absent, `null` stays `null`), so a journal keeps one form across the change.
    #[test]
    fn typed_bodies_are_byte_compatible_with_the_json_they_replace() {
        fn same<B: Body>(typed: &B, old: serde_json::Value) {
            let value = serde_json::to_value(typed).unwrap();
            assert_eq!(
                crate::canonical::to_string(&value),
                crate::canonical::to_string(&old),
                "{}",
                typed.kind()
            );
        }
        let row = ActionRow {
            state: State::Dispatched,
            tool: "http_request".into(),
            credential: "api".into(),
            summary: "GET /".into(),
            hash: "ab".into(),
            reason: None,
            basis: Some(Basis::Decision {
                decision: "dec_1".into(),
                nonce: "n".into(),
            }),
            method: None,
            touch: None,
            signed: None,
        };
        same(
            &row,
            json!({"state": "dispatched", "tool": "http_request", "credential": "api",
                "summary": "GET /", "hash": "ab", "basis": {"decision": "dec_1", "nonce": "n"}}),
        );
        let plain = ActionRow {
            state: State::Pending,
            basis: None,
            ..row
        };
        same(
            &plain,
            json!({"state": "pending", "tool": "http_request", "credential": "api",
                "summary": "GET /", "hash": "ab"}),
        );
        same(
            &CallRejected {
                code: -32602,
                reason: "bad".into(),
                fingerprint: "ff".into(),
                tool: None,
            },
            json!({"code": -32602, "reason": "bad", "fingerprint": "ff", "tool": null}),
        );
        same(
            &SessionStart {
                client: ClientLabel {
                    name: "c".into(),
                    version: "1".into(),
                },
                peer: Process {
                    pid: Some(7),
                    exe: None,
                },
                parent: Process::default(),
                profile: "default".into(),
                protocol_version: "2025-11-25".into(),
                contained: false,
            },
            json!({"client": {"name": "c", "version": "1"}, "peer": {"pid": 7, "exe": null},
                "parent": {"pid": null, "exe": null}, "profile": "default",
                "protocol_version": "2025-11-25"}),
        );
        same(
            &SessionEnd {
                reason: "eof".into(),
                withdrawn: 2,
                suppressed_rejections: 0,
            },
            json!({"reason": "eof", "withdrawn": 2, "suppressed_rejections": 0}),
        );
        let target: Target = serde_json::from_value(json!({"kind": "ssh",
            "host": "h", "port": 22, "user": "u", "host_key": "SHA256:x", "allow_commands": [],
            "auth": {"type": "password"}}))
        .unwrap();
        let cred = CredentialBody {
            id: "cred_1".into(),
            profile: "default".into(),
            name: "web".into(),
            kind: "ssh".into(),
            version: 2,
            approval: Approval::Each,
            target: "u@h:22".into(),
            binding: target.clone(),
            changed: None,
            signed: None,
        };
        let old = json!({"id": "cred_1", "profile": "default", "name": "web", "kind": "ssh",
            "version": 2, "approval": "each", "target": "u@h:22",
            "binding": serde_json::to_value(&target).unwrap()});
        same(&CredentialAdded(cred.clone()), old.clone());
        let mut edited = old;
        edited["changed"] = json!(["host_key"]);
        same(
            &CredentialEdited(CredentialBody {
                changed: Some(vec!["host_key".into()]),
                ..cred
            }),
            edited,
        );
    }
}
