//! MCP lifecycle and versions: the `initialize` handshake (2025-11-25, echoing 2024-11-05,
//! 2025-03-26 and 2025-06-18), and the stateless 2026-07-28 style (`server/discover`, protocol
//! version and client capabilities in each request's `_meta`).
use super::jsonrpc::{RpcError, INVALID_PARAMS, INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION};
use serde_json::{json, Value};

pub const HANDSHAKE_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
pub const LATEST_HANDSHAKE: &str = "2025-11-25";
pub const MODERN_VERSION: &str = "2026-07-28";
pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub const META_CLIENT_CAPS: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

pub const INSTRUCTIONS: &str = "agent-vault runs HTTP requests and SSH commands with credentials it keeps; \
the credentials themselves are never returned. Actions usually wait for a person to approve them in a terminal. \
list_credentials shows what exists; get_action and list_recent_actions show what was asked for.";

/// Which protocol generation this connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// Nothing decided yet.
    Unset,
    /// `initialize` handshake; `version` was negotiated.
    Legacy { initialized: bool },
    /// 2026-07-28: every request carries its version in `_meta`.
    Modern,
}

pub use crate::wire::ClientInfo;

pub fn server_info() -> Value {
    json!({"name": "agent-vault", "title": "agent-vault", "version": env!("CARGO_PKG_VERSION")})
}

fn capabilities() -> Value {
    json!({"tools": {"listChanged": false}})
}

/// Validates `initialize` params and answers with the negotiated version.
pub fn initialize(params: Option<&Value>) -> Result<(Value, ClientInfo), RpcError> {
    let p = params.and_then(Value::as_object).ok_or_else(|| {
        RpcError::new(
            INVALID_PARAMS,
            "initialize needs params {protocolVersion, capabilities, clientInfo}",
        )
    })?;
    let requested = p
        .get("protocolVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            RpcError::new(
                INVALID_PARAMS,
                "initialize: protocolVersion must be a string",
            )
        })?;
    if !p.get("capabilities").is_some_and(Value::is_object) {
        return Err(RpcError::new(
            INVALID_PARAMS,
            "initialize: capabilities must be an object",
        ));
    }
    let info = p
        .get("clientInfo")
        .and_then(Value::as_object)
        .ok_or_else(|| RpcError::new(INVALID_PARAMS, "initialize: clientInfo must be an object"))?;
    let name = info.get("name").and_then(Value::as_str).ok_or_else(|| {
        RpcError::new(
            INVALID_PARAMS,
            "initialize: clientInfo.name must be a string",
        )
    })?;
    let version = info.get("version").and_then(Value::as_str).unwrap_or("");
    let negotiated = if HANDSHAKE_VERSIONS.contains(&requested) {
        requested
    } else {
        LATEST_HANDSHAKE
    };
    let result = json!({
        "protocolVersion": negotiated,
        "capabilities": capabilities(),
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    });
    Ok((
        result,
        ClientInfo {
            name: bounded(name),
            version: bounded(version),
            protocol_version: negotiated.into(),
        },
    ))
}

fn bounded(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(128).collect()
}

/// The `server/discover` result.
pub fn discover() -> Value {
    json!({
        "supportedVersions": [MODERN_VERSION],
        "capabilities": capabilities(),
        "instructions": INSTRUCTIONS,
        "resultType": "complete",
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": {META_SERVER_INFO: server_info()},
    })
}

/// The per-request `_meta` protocol version, if the request carries one.
pub fn meta_version(params: Option<&Value>) -> Result<Option<&str>, RpcError> {
    let Some(meta) = params.and_then(|p| p.get("_meta")) else {
        return Ok(None);
    };
    let meta = meta
        .as_object()
        .ok_or_else(|| RpcError::new(INVALID_PARAMS, "_meta must be an object"))?;
    match meta.get(META_VERSION) {
        None => Ok(None),
        Some(Value::String(v)) => Ok(Some(v.as_str())),
        Some(_) => Err(RpcError::new(
            INVALID_PARAMS,
            format!("_meta.{META_VERSION} must be a string"),
        )),
    }
}

/// Checks a modern request's `_meta`: the version we speak and client capabilities present.
pub fn check_modern_meta(params: Option<&Value>, version: &str) -> Result<ClientInfo, RpcError> {
    if version != MODERN_VERSION {
        return Err(unsupported(version));
    }
    let meta = params
        .and_then(|p| p.get("_meta"))
        .and_then(Value::as_object);
    if !meta
        .and_then(|m| m.get(META_CLIENT_CAPS))
        .is_some_and(Value::is_object)
    {
        return Err(RpcError::new(
            INVALID_PARAMS,
            format!("_meta.{META_CLIENT_CAPS} must be an object on 2026-07-28 requests"),
        ));
    }
    let info = meta.and_then(|m| m.get(META_CLIENT_INFO));
    let field = |k: &str| {
        info.and_then(|i| i.get(k))
            .and_then(Value::as_str)
            .map(bounded)
            .unwrap_or_default()
    };
    Ok(ClientInfo {
        name: field("name"),
        version: field("version"),
        protocol_version: MODERN_VERSION.into(),
    })
}

/// -32022 with the versions we accept on per-request `_meta`.
pub fn unsupported(requested: &str) -> RpcError {
    RpcError::new(
        UNSUPPORTED_PROTOCOL_VERSION,
        format!("unsupported protocol version {requested:?}"),
    )
    .with_data(json!({"supported": [MODERN_VERSION], "requested": requested}))
}

pub fn not_initialized(method: &str) -> RpcError {
    RpcError::new(
        INVALID_REQUEST,
        format!("{method} before initialize: send initialize first, or use protocol {MODERN_VERSION} with _meta on every request"),
    )
}

pub fn already_initialized() -> RpcError {
    RpcError::new(
        INVALID_REQUEST,
        "initialize was already done on this connection",
    )
}
