//! `model_standin.py`, the local stand-in for an AI client's model API (`tests/ai_clients.rs`),
//! and reading back what the client sent it: the tool results it forwarded, each JSON document
//! inside a string (a forwarded tool result), and where a given text occurs in all of it.
use super::{support_file, wait_until, TempDir};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The stand-in's last words in a turn (`FINAL` in `model_standin.py`).
pub const STANDIN_FINAL: &str =
    "The vault ran the request; the third-party body is data, and I did not follow it.";
/// The ids the stand-in gives its tool calls.
pub const HTTP_CALL_ID: &str = "toolu_standin_http_request";
pub const SEARCH_CALL_ID: &str = "toolu_standin_tool_search";

/// `model_standin.py` serving one API on a loopback port; every request it got is in its log.
pub struct StandIn {
    child: Child,
    pub port: u16,
    log: PathBuf,
    _dir: TempDir,
}

impl StandIn {
    /// `api` is `anthropic` or `gemini`; `plan` is the stand-in's PLAN_JSON.
    pub fn start(api: &str, plan: &Value) -> Self {
        let dir = TempDir::new(&format!("standin-{api}"));
        let (log, port_file) = (dir.path().join("requests.jsonl"), dir.path().join("port"));
        let child = Command::new("python3")
            .arg(support_file("model_standin.py"))
            .args([api, log.to_str().unwrap(), port_file.to_str().unwrap()])
            .arg(plan.to_string())
            .stdin(Stdio::null())
            .spawn()
            .expect("python3 runs the model stand-in");
        let mut port = 0;
        wait_until(
            Duration::from_secs(10),
            "the stand-in never listened",
            || {
                port = std::fs::read_to_string(&port_file)
                    .ok()
                    .and_then(|p| p.parse().ok())
                    .unwrap_or(0);
                port != 0
            },
        );
        Self {
            child,
            port,
            log,
            _dir: dir,
        }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request the client sent, in order: the raw JSONL line and its `body`.
    pub fn requests(&self) -> Vec<(String, Value)> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                (l.to_owned(), v)
            })
            .collect()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A JSON document inside a string: the whole string, or the part from its first `{` to its last
/// `}` (a client may put an envelope such as `<untrusted_context>` around a tool's text).
pub fn embedded_json(s: &str) -> Option<(Value, String)> {
    let (start, end) = (s.find('{')?, s.rfind('}')?);
    let doc = serde_json::from_str(s.get(start..=end)?).ok()?;
    Some((doc, format!("{}{}", &s[..start], &s[end + 1..])))
}

/// Every path at which `needle` occurs in `v` (in a string or a key); a string that holds a JSON
/// document is followed into (`<json>` in the path), its envelope checked as text of its own.
pub fn paths_of(v: &Value, needle: &str, at: &str, out: &mut Vec<String>) {
    match v {
        Value::String(s) if s.contains(needle) => match embedded_json(s) {
            Some((doc, envelope)) => {
                if envelope.contains(needle) {
                    out.push(format!("{at}.<envelope>"));
                }
                paths_of(&doc, needle, &format!("{at}.<json>"), out);
            }
            None => out.push(at.to_owned()),
        },
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, x)| paths_of(x, needle, &format!("{at}.{i}"), out)),
        Value::Object(o) => {
            for (k, x) in o {
                let here = format!("{at}.{k}");
                if k.contains(needle) {
                    out.push(here.clone());
                }
                paths_of(x, needle, &here, out);
            }
        }
        _ => {}
    }
}

/// Every string and key in `v`, JSON documents inside strings decoded too.
pub fn all_text(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
            if let Some((doc, _)) = embedded_json(s) {
                all_text(&doc, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| all_text(x, out)),
        Value::Object(o) => o.iter().for_each(|(k, x)| {
            out.push_str(k);
            out.push('\n');
            all_text(x, out);
        }),
        _ => {}
    }
}

/// The `tool_result` blocks for the call `id` in the last request Claude Code sent.
pub fn claude_tool_results(requests: &[(String, Value)], id: &str) -> Vec<Value> {
    let last = &requests.last().unwrap().1["body"];
    let blocks = last["messages"].as_array().into_iter().flatten();
    let blocks = blocks.flat_map(|m| m["content"].as_array().into_iter().flatten());
    blocks
        .filter(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
        .cloned()
        .collect()
}

/// The JSON of the tool results Claude Code forwarded for the stand-in's `http_request` call.
pub fn claude_results(requests: &[(String, Value)]) -> Vec<Value> {
    let results = claude_tool_results(requests, HTTP_CALL_ID);
    let text = |b: &Value| match &b["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        other => panic!("unexpected tool_result content: {other}"),
    };
    let json = |b: &Value| embedded_json(&text(b)).expect("the tool result is JSON").0;
    results.iter().map(json).collect()
}

/// The JSON of the `http_request` results Gemini CLI forwarded (`functionResponse` parts of the
/// last request; the text inside Gemini's `<untrusted_context>` envelope).
pub fn gemini_results(requests: &[(String, Value)]) -> Vec<Value> {
    let last = &requests.last().unwrap().1["body"];
    let parts = last["contents"].as_array().into_iter().flatten();
    let parts = parts.flat_map(|c| c["parts"].as_array().into_iter().flatten());
    let responses = parts.map(|p| &p["functionResponse"]);
    let ours = responses.filter(|r| r["name"] == "mcp_agent-vault_http_request");
    let json = |r: &Value| match &r["response"]["output"] {
        Value::String(s) => embedded_json(s).expect("the tool result is JSON").0,
        _ => r["response"].clone(),
    };
    ours.map(json).collect()
}
