//! The tool results' enums (every `enum` in an `outputSchema` of `schema/tools/*.json`, what a
//! validating client holds results to) and the Rust types the results are built from say the
//! same thing: every `state` is `State`, `kind` and `approval` of `list_credentials` are `Target`
//! and `Approval`. `error.code` is a plain string in every tool (no enum: `tools/list` stays
//! under 8 KiB, and a client never rejects a code added later; tests/result_shapes.rs still
//! produces every `ToolErrorCode`). Compared as sets, in both directions; a
//! failure names the tool, the property path and the value missing on each side. An enum in a
//! schema with no Rust list here fails too, and so does a Rust list no schema holds any more.
use crate::approvals::State;
use crate::credentials::{Approval, Target};
use crate::wire::ToolErrorCode;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::collections::BTreeSet;

const ACTION_TOOLS: &[&str] = &["http_request", "ssh_exec", "get_action", "cancel_action"];
const ALL_TOOLS: &[&str] = &[
    "list_credentials",
    "http_request",
    "ssh_exec",
    "get_action",
    "list_recent_actions",
    "cancel_action",
];

/// One output enum and the Rust list it must equal.
struct Source {
    /// The property path in an `outputSchema` (`a.b`; `[]` is an array's items).
    path: &'static str,
    /// The tools whose `outputSchema` must hold this enum.
    tools: &'static [&'static str],
    /// Where the Rust list comes from (named in failures).
    rust: &'static str,
    values: BTreeSet<String>,
}

/// The names serde accepts for `T`, read from the error it gives for an unknown one: the real
/// variants, so one left out of a hand-written `ALL` still counts.
fn serde_variants<T: DeserializeOwned>(probe: Value) -> BTreeSet<String> {
    let err = serde_json::from_value::<T>(probe)
        .map(drop)
        .expect_err("an unknown variant is refused")
        .to_string();
    let expected = err
        .split_once("expected")
        .unwrap_or_else(|| panic!("unexpected serde message: {err}"))
        .1;
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

fn set<'a>(values: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    values.into_iter().map(str::to_owned).collect()
}

/// Every output enum's Rust source.
fn sources() -> Vec<Source> {
    let probe = || json!("zz_parity_probe");
    let states = serde_variants::<State>(probe());
    vec![
        Source {
            path: "state",
            tools: ACTION_TOOLS,
            rust: "approvals::State",
            values: states.clone(),
        },
        Source {
            path: "actions[].state",
            tools: &["list_recent_actions"],
            rust: "approvals::State",
            values: states,
        },
        Source {
            path: "credentials[].kind",
            tools: &["list_credentials"],
            rust: "credentials::Target",
            values: serde_variants::<Target>(json!({"kind": "zz_parity_probe"})),
        },
        Source {
            path: "credentials[].approval",
            tools: &["list_credentials"],
            rust: "credentials::Approval",
            values: serde_variants::<Approval>(probe()),
        },
        // `StreamEnd` is private to `src/exec/ssh/run.rs`: its `as_str` spellings, copied. Replace
        // with the type once the result shapes expose it.
        Source {
            path: "ssh.stream_end",
            tools: &["ssh_exec", "get_action"],
            rust: "exec::ssh::run::StreamEnd (copied)",
            values: set(["eof", "cancelled", "timeout"]),
        },
    ]
}

/// Every `enum` in `schema`, with its property path.
fn enums_in(schema: &Value, path: &str, out: &mut Vec<(String, BTreeSet<String>)>) {
    let join = |k: &str| {
        if path.is_empty() {
            k.to_owned()
        } else {
            format!("{path}.{k}")
        }
    };
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        out.push((
            path.to_owned(),
            values
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .collect(),
        ));
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, s) in props {
            enums_in(s, &join(k), out);
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        enums_in(items, &format!("{path}[]"), out);
    }
    if let Some(extra) = schema.get("additionalProperties").filter(|i| i.is_object()) {
        enums_in(extra, &join("*"), out);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        for s in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            enums_in(s, path, out);
        }
    }
}

/// Every disagreement between the catalog's output enums and the Rust lists.
fn disagreements(catalog: &[Value], sources: &[Source]) -> Vec<String> {
    let mut out = Vec::new();
    for tool in catalog {
        let name = tool["name"].as_str().unwrap_or("?");
        let mut found = Vec::new();
        enums_in(&tool["outputSchema"], "", &mut found);
        for (path, listed) in &found {
            let Some(src) = sources.iter().find(|s| s.path == path) else {
                out.push(format!(
                    "{name}: `{path}` has an enum with no Rust list to hold it to (add one to sources())"
                ));
                continue;
            };
            for v in listed.difference(&src.values) {
                out.push(format!(
                    "{name}: `{path}` lists {v:?} in the schema; {} has no such value",
                    src.rust
                ));
            }
            for v in src.values.difference(listed) {
                out.push(format!(
                    "{name}: `{path}` lacks {v:?} in the schema; {} has it",
                    src.rust
                ));
            }
        }
        for src in sources.iter().filter(|s| s.tools.contains(&name)) {
            if !found.iter().any(|(p, _)| p == src.path) {
                out.push(format!(
                    "{name}: `{}` has no enum in the schema; {} lists {:?}",
                    src.path, src.rust, src.values
                ));
            }
        }
    }
    out
}

#[test]
fn every_output_enum_agrees_with_its_rust_source() {
    let found = disagreements(crate::wire::catalog::catalog(), &sources());
    assert!(
        found.is_empty(),
        "outputSchema and Rust disagree:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_hand_written_lists_hold_every_variant() {
    let probe = || json!("zz_parity_probe");
    assert_eq!(
        set(State::ALL.map(State::as_str)),
        serde_variants::<State>(probe())
    );
    assert_eq!(
        set(ToolErrorCode::ALL.iter().map(|c| c.as_str())),
        serde_variants::<ToolErrorCode>(probe())
    );
    assert_eq!(
        set(Approval::ALL.map(Approval::as_str)),
        serde_variants::<Approval>(probe())
    );
}

#[test]
fn the_output_check_fails_when_one_side_changes() {
    // The shipped catalog with one change each: a code enum added, a state added, an enum made a
    // free string, and an enum nobody holds. Each is named with its tool and path.
    let mut catalog = crate::wire::catalog::catalog().to_vec();
    let tool = |c: &[Value], n: &str| c.iter().position(|t| t["name"] == n).unwrap();
    let http = tool(&catalog, "http_request");
    let props = &mut catalog[http]["outputSchema"]["properties"];
    props["error"]["properties"]["code"]["enum"] = json!(["limit"]);
    props["state"]["enum"]
        .as_array_mut()
        .unwrap()
        .push(json!("paused"));
    props["summary"]["enum"] = json!(["a"]);
    let recent = tool(&catalog, "list_recent_actions");
    catalog[recent]["outputSchema"]["properties"]["actions"]["items"]["properties"]["state"] =
        json!({"type": "string"});
    let found = disagreements(&catalog, &sources()).join("\n");
    for want in [
        "http_request: `error.code` has an enum with no Rust list to hold it to",
        "http_request: `state` lists \"paused\" in the schema; approvals::State has no such value",
        "http_request: `summary` has an enum with no Rust list to hold it to",
        "list_recent_actions: `actions[].state` has no enum in the schema; approvals::State lists",
    ] {
        assert!(found.contains(want), "missing {want:?} in:\n{found}");
    }
    assert!(
        !found.contains("ssh_exec"),
        "only the changed tools: {found}"
    );
}

#[test]
fn every_tool_gives_error_code_as_a_plain_string() {
    for tool in crate::wire::catalog::catalog() {
        let code = &tool["outputSchema"]["properties"]["error"]["properties"]["code"];
        assert_eq!(code, &json!({"type": "string"}), "{}", tool["name"]);
    }
    assert!(ALL_TOOLS.len() == crate::wire::catalog::catalog().len());
}
