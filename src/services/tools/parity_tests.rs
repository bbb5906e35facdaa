//! The tool schemas (`schema/tools/*.json`, what clients see) and the Rust argument structs (what
//! the vault parses) say the same thing: the same argument names, the same required ones, the same
//! JSON types, and enums equal to the Rust lists. Change one side only and this fails, naming the
//! tool and the argument.
use super::{CancelArgs, GetArgs, NoArgs, RecentArgs};
use crate::credentials::{http_methods, Approval};
use crate::policy::{HttpArgs, SshArgs};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

type Parse = fn(Value) -> Result<(), String>;

fn parser<T: serde::de::DeserializeOwned>() -> Parse {
    |v| {
        serde_json::from_value::<T>(v)
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

/// Each tool and the struct its handler parses its arguments into.
fn structs() -> Vec<(&'static str, Parse)> {
    vec![
        ("list_credentials", parser::<NoArgs>()),
        ("http_request", parser::<HttpArgs>()),
        ("ssh_exec", parser::<SshArgs>()),
        ("get_action", parser::<GetArgs>()),
        ("list_recent_actions", parser::<RecentArgs>()),
        ("cancel_action", parser::<CancelArgs>()),
    ]
}

/// Each schema enum and the Rust list it must equal.
fn enums() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    vec![("http_request", "method", http_methods().to_vec())]
}

/// The struct's field names, as serde lists them when refusing an unknown one.
fn fields(parse: Parse) -> BTreeSet<String> {
    let err = parse(json!({"zz_parity_probe": 0})).expect_err("deny_unknown_fields");
    if err.contains("there are no fields") {
        return BTreeSet::new();
    }
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

fn sample(schema: &Value) -> Value {
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    match schema["type"].as_str() {
        Some("string") => json!("act_0123456789abcdef0123456789abcdef"),
        Some("integer") => json!(schema["minimum"].as_u64().unwrap_or(1)),
        Some("object") => json!({"k": "v"}),
        Some("boolean") => json!(true),
        Some(other) => panic!("no sample for schema type {other}"),
        None => json!({"any": ["json"]}),
    }
}

fn wrong_type(schema: &Value) -> Option<Value> {
    match schema["type"].as_str()? {
        "string" => Some(json!(7)),
        "integer" => Some(json!("7")),
        "object" => Some(json!("not an object")),
        "boolean" => Some(json!("yes")),
        _ => None,
    }
}

/// Finds every disagreement between the catalog and the structs.
fn disagreements(catalog: &[Value], structs: &[(&str, Parse)]) -> Vec<String> {
    let mut out = Vec::new();
    for tool in catalog {
        let name = tool["name"].as_str().unwrap_or("?");
        let Some(&(_, parse)) = structs.iter().find(|(t, _)| *t == name) else {
            out.push(format!("{name}: no argument struct is listed for it"));
            continue;
        };
        let input = &tool["inputSchema"];
        let props = input["properties"].as_object().cloned().unwrap_or_default();
        let required: BTreeSet<String> = input["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        let in_schema: BTreeSet<String> = props.keys().cloned().collect();
        let in_struct = fields(parse);
        for f in in_struct.difference(&in_schema) {
            out.push(format!(
                "{name}: the struct takes `{f}`, the schema does not"
            ));
        }
        for f in in_schema.difference(&in_struct) {
            out.push(format!(
                "{name}: the schema offers `{f}`, the struct does not take it"
            ));
        }
        let with = |keys: &dyn Fn(&str) -> bool| -> Map<String, Value> {
            props
                .iter()
                .filter(|(k, _)| keys(k))
                .map(|(k, s)| (k.clone(), sample(s)))
                .collect()
        };
        let minimal = with(&|k| required.contains(k));
        if let Err(e) = parse(Value::Object(minimal.clone())) {
            out.push(format!(
                "{name}: the schema's required arguments alone are refused: {e}"
            ));
        }
        for r in &required {
            let mut missing = minimal.clone();
            missing.remove(r);
            if parse(Value::Object(missing)).is_ok() {
                out.push(format!(
                    "{name}: `{r}` is required by the schema, optional in the struct"
                ));
            }
        }
        for (k, s) in &props {
            if !required.contains(k) {
                let mut one = minimal.clone();
                one.insert(k.clone(), sample(s));
                if let Err(e) = parse(Value::Object(one)) {
                    out.push(format!(
                        "{name}: `{k}` as the schema types it is refused: {e}"
                    ));
                }
            }
            if let Some(bad) = wrong_type(s) {
                let mut one = minimal.clone();
                one.insert(k.clone(), bad.clone());
                if parse(Value::Object(one)).is_ok() {
                    out.push(format!(
                        "{name}: `{k}` is {} in the schema, but the struct accepts {bad}",
                        s["type"]
                    ));
                }
            }
            if let Some(values) = s["enum"].as_array() {
                let listed: Vec<&str> = values.iter().filter_map(Value::as_str).collect();
                match enums().into_iter().find(|(t, a, _)| *t == name && a == k) {
                    Some((_, _, rust)) if rust == listed => {}
                    Some((_, _, rust)) => out.push(format!(
                        "{name}: `{k}` enum is {listed:?} in the schema, {rust:?} in Rust"
                    )),
                    None => out.push(format!(
                        "{name}: `{k}` has an enum with no Rust list to hold it to (add one to enums())"
                    )),
                }
            }
        }
    }
    out
}

#[test]
fn every_tool_schema_agrees_with_its_argument_struct() {
    let found = disagreements(crate::wire::catalog::catalog(), &structs());
    assert!(
        found.is_empty(),
        "schema and struct disagree:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_output_enums_agree_with_the_rust_types() {
    let list = crate::wire::catalog::find("list_credentials").unwrap();
    let item = &list["outputSchema"]["properties"]["credentials"]["items"]["properties"];
    let approvals: Vec<&str> = Approval::ALL.map(Approval::as_str).to_vec();
    assert_eq!(item["approval"]["enum"], json!(approvals));
    assert_eq!(item["kind"]["enum"], json!(["http", "ssh"]));
}

#[test]
fn the_check_fails_when_one_side_changes() {
    // The shipped catalog with one change each: a renamed argument, a dropped requirement, a
    // wrong type and an enum that grew. Each is named.
    let mut catalog = crate::wire::catalog::catalog().to_vec();
    let http = catalog
        .iter_mut()
        .find(|t| t["name"] == "http_request")
        .unwrap();
    let props = http["inputSchema"]["properties"].as_object_mut().unwrap();
    let url = props.remove("url").unwrap();
    props.insert("uri".into(), url);
    props["timeout_s"]["type"] = json!("string");
    props["method"]["enum"]
        .as_array_mut()
        .unwrap()
        .push(json!("get"));
    http["inputSchema"]["required"] = json!(["credential", "method", "uri"]);
    let get = catalog
        .iter_mut()
        .find(|t| t["name"] == "get_action")
        .unwrap();
    get["inputSchema"]["required"] = json!([]);
    let found = disagreements(&catalog, &structs()).join("\n");
    for want in [
        "http_request: the struct takes `url`, the schema does not",
        "http_request: the schema offers `uri`, the struct does not take it",
        "http_request: `timeout_s` as the schema types it is refused",
        "http_request: `method` enum is",
        "get_action: the schema's required arguments alone are refused",
    ] {
        assert!(found.contains(want), "missing {want:?} in:\n{found}");
    }
}
