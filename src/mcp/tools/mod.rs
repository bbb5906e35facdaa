//! The tool catalog (schemas from `schema/tools/*.json`, embedded at build time) and `tools/list`
//! paging. The agent's tool services check arguments against the same schemas.
use super::jsonrpc::{RpcError, INVALID_PARAMS};
use serde_json::{Map, Value};

/// Tools per `tools/list` page.
pub const PAGE_SIZE: usize = 50;

pub use crate::wire::catalog::{allowed_args, catalog, catalog_json, find};

/// `tools/list`: a page of the catalog after `cursor` (an opaque offset).
pub fn list(params: Option<&Value>) -> Result<Value, RpcError> {
    let cursor = match params.and_then(|p| p.get("cursor")) {
        None | Some(Value::Null) => 0,
        Some(Value::String(c)) => c
            .parse::<usize>()
            .ok()
            .filter(|n| *n < catalog().len())
            .ok_or_else(|| {
                RpcError::new(
                    INVALID_PARAMS,
                    "tools/list: unknown cursor; start again without one",
                )
            })?,
        Some(_) => {
            return Err(RpcError::new(
                INVALID_PARAMS,
                "tools/list: cursor must be a string",
            ))
        }
    };
    Ok(page(catalog(), cursor, PAGE_SIZE))
}

fn page(all: &[Value], start: usize, size: usize) -> Value {
    let end = (start + size).min(all.len());
    let mut out = Map::new();
    out.insert("tools".into(), Value::Array(all[start..end].to_vec()));
    if end < all.len() {
        out.insert("nextCursor".into(), Value::String(end.to_string()));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_is_complete_and_schemas_are_closed() {
        let names: Vec<&str> = catalog()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "list_credentials",
                "http_request",
                "ssh_exec",
                "get_action",
                "list_recent_actions",
                "cancel_action"
            ]
        );
        for t in catalog() {
            assert!(t["description"].as_str().unwrap().len() > 40);
            assert_eq!(t["inputSchema"]["type"], "object");
            assert_eq!(
                t["inputSchema"]["additionalProperties"], false,
                "{}",
                t["name"]
            );
            assert_eq!(t["outputSchema"]["type"], "object");
            assert!(
                t["outputSchema"]["properties"]["error"].is_object(),
                "output schema covers errors: {}",
                t["name"]
            );
            assert!(t["annotations"]["readOnlyHint"].is_boolean());
            assert!(!t.to_string().contains("$ref"), "refs are inlined");
        }
        assert_eq!(
            find("http_request").unwrap()["annotations"]["openWorldHint"],
            true
        );
        assert_eq!(
            find("http_request").unwrap()["annotations"]["destructiveHint"],
            true
        );
    }

    #[test]
    fn paging_is_stable_and_cursors_are_checked() {
        let all = catalog();
        let first = page(all, 0, 4);
        assert_eq!(first["tools"].as_array().unwrap().len(), 4);
        assert_eq!(first["nextCursor"], "4");
        let second = page(all, 4, 4);
        assert_eq!(second["tools"].as_array().unwrap().len(), 2);
        assert!(second.get("nextCursor").is_none());
        assert!(list(Some(&serde_json::json!({"cursor": "99"}))).is_err());
        assert!(list(Some(&serde_json::json!({"cursor": 1}))).is_err());
        assert_eq!(list(None).unwrap()["tools"].as_array().unwrap().len(), 6);
    }
}
