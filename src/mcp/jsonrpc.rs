//! JSON-RPC 2.0 classification of one frame, strictly: UTF-8, exactly one JSON value, no
//! duplicate object keys, an object with `jsonrpc: "2.0"`, a string `method`, an `id` that is a
//! string or an integer (absent for a notification), and no other members. Anything else is
//! `-32700` (not JSON) or `-32600` (not a request); both close the session.
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{json, Map, Value};
use std::fmt;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
/// MCP 2026-07-28: the request's protocol version is not one this server speaks.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
    pub fn to_json(&self) -> Value {
        let mut e = json!({"code": self.code, "message": self.message});
        if let Some(d) = &self.data {
            e["data"] = d.clone();
        }
        e
    }
}

/// One classified inbound message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// `id` is a JSON string or integer, kept as given for the response.
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
}

/// Classifies one frame (without its `\n`).
pub fn classify(line: &[u8]) -> Result<Message, RpcError> {
    let text = std::str::from_utf8(line)
        .map_err(|_| RpcError::new(PARSE_ERROR, "Parse error: the line is not valid UTF-8"))?;
    let value = parse_strict(text)?;
    let Value::Object(mut obj) = value else {
        let what = if value.is_array() {
            "a batch array (batches are not accepted)"
        } else {
            "not an object"
        };
        return Err(RpcError::new(
            INVALID_REQUEST,
            format!("Invalid Request: the message is {what}"),
        ));
    };
    if obj.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return Err(RpcError::new(
            INVALID_REQUEST,
            "Invalid Request: \"jsonrpc\" must be \"2.0\"",
        ));
    }
    if let Some(extra) = obj
        .keys()
        .find(|k| !matches!(k.as_str(), "jsonrpc" | "id" | "method" | "params"))
    {
        return Err(RpcError::new(
            INVALID_REQUEST,
            format!("Invalid Request: unexpected member {extra:?}"),
        ));
    }
    let method = match obj.remove("method") {
        Some(Value::String(m)) => m,
        Some(_) => {
            return Err(RpcError::new(
                INVALID_REQUEST,
                "Invalid Request: \"method\" must be a string",
            ))
        }
        None => return Err(RpcError::new(
            INVALID_REQUEST,
            "Invalid Request: no \"method\" (this server accepts requests and notifications only)",
        )),
    };
    let params = obj.remove("params");
    match obj.remove("id") {
        None => Ok(Message::Notification { method, params }),
        Some(id @ Value::String(_)) => Ok(Message::Request { id, method, params }),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Ok(Message::Request {
            id: Value::Number(n),
            method,
            params,
        }),
        Some(_) => Err(RpcError::new(
            INVALID_REQUEST,
            "Invalid Request: \"id\" must be a string or an integer",
        )),
    }
}

/// Exactly one JSON value with no duplicate keys at any depth.
pub fn parse_strict(text: &str) -> Result<Value, RpcError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let v = StrictValue::deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| RpcError::new(PARSE_ERROR, format!("Parse error: {e}")))?;
    Ok(v.0)
}

struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(StrictValue(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let StrictValue(v) = map.next_value()?;
            if out.insert(key.clone(), v).is_some() {
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
        }
        Ok(Value::Object(out))
    }
}

/// A response line (with its `\n`).
pub fn response(id: &Value, result: Value) -> String {
    let mut s = serde_json::to_string(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
        .expect("JSON");
    s.push('\n');
    s
}

/// An error response line; `id` is null when the request could not be read.
pub fn error_response(id: Option<&Value>, err: &RpcError) -> String {
    let mut s = serde_json::to_string(&json!({"jsonrpc": "2.0", "id": id.cloned().unwrap_or(Value::Null), "error": err.to_json()}))
        .expect("JSON");
    s.push('\n');
    s
}

/// A notification line.
pub fn notification(method: &str, params: Value) -> String {
    let mut s =
        serde_json::to_string(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .expect("JSON");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(line: &str) -> i64 {
        classify(line.as_bytes()).unwrap_err().code
    }

    #[test]
    fn requests_and_notifications() {
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).unwrap(),
            Message::Request {
                id: json!(7),
                method: "ping".into(),
                params: None
            }
        );
        assert!(matches!(
            classify(br#" {"jsonrpc":"2.0","id":"a","method":"x","params":{}}"#),
            Ok(Message::Request { .. })
        ));
        assert!(matches!(
            classify(b"{\"jsonrpc\":\"2.0\",\"method\":\"n\"}\r"),
            Ok(Message::Notification { .. })
        ));
    }

    #[test]
    fn every_wrong_shape_has_its_code() {
        assert_eq!(code("not json"), PARSE_ERROR);
        assert_eq!(
            code("\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}"),
            PARSE_ERROR
        );
        assert_eq!(
            code(
                r#"{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0","id":2,"method":"ping"}"#
            ),
            PARSE_ERROR
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"}"#),
            PARSE_ERROR
        );
        assert_eq!(
            code(&format!("{}1{}", "[".repeat(200), "]".repeat(200))),
            PARSE_ERROR
        );
        assert_eq!(code("[]"), INVALID_REQUEST);
        assert_eq!(code("null"), INVALID_REQUEST);
        assert_eq!(
            code(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#),
            INVALID_REQUEST
        );
        assert_eq!(code(r#"{"id":1,"method":"ping"}"#), INVALID_REQUEST);
        for id in ["true", "1.5", "1.0", "null", "{}", "[1]", "1e3"] {
            assert_eq!(
                code(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#)),
                INVALID_REQUEST,
                "id {id}"
            );
        }
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":5}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"ping","workspace_id":"w"}"#),
            INVALID_REQUEST
        );
        assert!(classify(&[0xff, 0xfe]).is_err());
        assert_eq!(
            code("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\u{0}\"}"),
            PARSE_ERROR
        );
    }
}
