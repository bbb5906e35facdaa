//! The tool catalog: every tool's name, description, input and output schema, from
//! `schema/tools/*.json` embedded at build time with the shared definitions of `common.json`
//! inlined. `vault mcp` lists it; the agent's tool services check arguments against it.
use serde_json::Value;
use std::sync::OnceLock;

const COMMON: &str = include_str!("../../schema/tools/common.json");
const FILES: &[&str] = &[
    include_str!("../../schema/tools/list_credentials.json"),
    include_str!("../../schema/tools/http_request.json"),
    include_str!("../../schema/tools/ssh_exec.json"),
    include_str!("../../schema/tools/get_action.json"),
    include_str!("../../schema/tools/list_recent_actions.json"),
    include_str!("../../schema/tools/cancel_action.json"),
];

/// Every tool definition, in catalog order, with shared definitions inlined.
pub fn catalog() -> &'static [Value] {
    static CATALOG: OnceLock<Vec<Value>> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let common: Value =
            serde_json::from_str(COMMON).expect("schema/tools/common.json is valid JSON");
        FILES
            .iter()
            .map(|f| {
                let mut tool: Value =
                    serde_json::from_str(f).expect("schema/tools/*.json is valid JSON");
                inline_refs(&mut tool, &common["definitions"]);
                tool
            })
            .collect()
    })
}

/// The catalog as one JSON array (for tests and documentation).
pub fn catalog_json() -> Value {
    Value::Array(catalog().to_vec())
}

fn inline_refs(v: &mut Value, defs: &Value) {
    match v {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get("$ref") {
                if let Some(name) = r.strip_prefix("common.json#/definitions/") {
                    let mut def = defs[name].clone();
                    inline_refs(&mut def, defs);
                    *v = def;
                    return;
                }
            }
            map.values_mut().for_each(|x| inline_refs(x, defs));
        }
        Value::Array(items) => items.iter_mut().for_each(|x| inline_refs(x, defs)),
        _ => {}
    }
}

pub fn find(name: &str) -> Option<&'static Value> {
    catalog().iter().find(|t| t["name"] == name)
}

/// Argument names a tool accepts.
pub fn allowed_args(tool: &Value) -> Vec<&str> {
    tool["inputSchema"]["properties"]
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default()
}
