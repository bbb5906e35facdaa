//! Tool results as they cross the agent's socket and reach the client: `structuredContent` and a
//! text block carrying the same JSON; failures are `isError: true` with text that starts with
//! `Error:`, names cause and fix, and ends with the JSON on one line. The two results every
//! adapter gives on its own (no vault, no agent) are here too.
use super::ToolErrorCode;
use serde_json::{json, Map, Value};

/// One tool call's outcome (it crosses the agent's socket whole: the adapter only wraps it).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolResult {
    pub structured: Value,
    pub is_error: bool,
    text: String,
}

impl ToolResult {
    /// A success: the text block is exactly the JSON of `structured`.
    pub fn ok(structured: Value) -> Self {
        let text = structured.to_string();
        Self {
            structured,
            is_error: false,
            text,
        }
    }

    /// A failure with an `error` object (and `extra` members such as `action_id`, `state`).
    pub fn error(
        code: ToolErrorCode,
        message: &str,
        fix: &str,
        details: Value,
        extra: Map<String, Value>,
    ) -> Self {
        let mut obj = extra;
        obj.insert(
            "error".into(),
            json!({"code": code.as_str(), "message": message, "fix": fix, "details": details}),
        );
        let structured = Value::Object(obj);
        let text = format!("Error: {message}\nFix: {fix}\n{structured}");
        Self {
            structured,
            is_error: true,
            text,
        }
    }

    /// The error code of a failure (read back from the result it is part of).
    pub fn code(&self) -> Option<ToolErrorCode> {
        ToolErrorCode::parse(self.structured.get("error")?.get("code")?.as_str()?)
    }

    /// The `tools/call` result object.
    pub fn to_json(&self, modern: bool) -> Value {
        let mut r = json!({
            "content": [{"type": "text", "text": self.text}],
            "structuredContent": self.structured,
            "isError": self.is_error,
        });
        if modern {
            r["resultType"] = json!("complete");
        }
        r
    }
}

/// The vault itself failed (store, agent): nothing about the request.
pub fn internal(msg: &str) -> ToolResult {
    ToolResult::error(
        ToolErrorCode::Internal,
        msg,
        "retry; if it persists, restart the MCP server and check `vault doctor`",
        json!({}),
        Map::new(),
    )
}

/// No custody agent holds the key (or there is no vault): say what the person must run.
pub fn locked(not_initialized: Option<&str>) -> ToolResult {
    match not_initialized {
        Some(dir) => ToolResult::error(
            ToolErrorCode::NotInitialized,
            &format!("there is no vault in {dir}"),
            "ask the person to run `vault init` in a terminal, then call the tool again",
            json!({}),
            Map::new(),
        ),
        None => ToolResult::error(
            ToolErrorCode::Locked,
            "the vault is locked: no vault agent holds its key",
            "ask the person to run `vault unlock` in a terminal, then call the tool again",
            json!({}),
            Map::new(),
        ),
    }
}
