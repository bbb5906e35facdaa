//! Team mode's steps as a person types them, for `tests/team_mode.rs` and
//! `tests/team_ssh_head.rs`: `vault openbao login` with an AppRole's role_id and secret_id,
//! `vault add http … --secret-from openbao:…`, and one `http_request` through `vault mcp`.
use super::mcp::McpProc;
use super::target::HttpTarget;
use super::{assert_no_leak, TestVault, PASSPHRASE};
use serde_json::{json, Value};

/// `vault openbao login --address ADDRESS --role-id ROLE_ID --secret-id-stdin`, the passphrase
/// and the secret_id on stdin; must succeed, and print neither.
pub fn login(v: &mut TestVault, address: &str, role_id: &str, secret_id: &str) {
    let out = v
        .run(
            &[
                "openbao",
                "login",
                "--address",
                address,
                "--role-id",
                role_id,
                "--secret-id-stdin",
                "--passphrase-stdin",
            ],
            Some(&format!("{PASSPHRASE}\n{secret_id}\n")),
        )
        .ok();
    assert!(
        out.stdout.contains("Logged in to OpenBao"),
        "{}",
        out.stdout
    );
    assert_no_leak("openbao login output", out.stdout.as_bytes(), secret_id);
}

/// `vault add http NAME --host TARGET --bearer --secret-from REFERENCE --approval APPROVAL`.
pub fn add_from_bao(
    v: &mut TestVault,
    name: &str,
    target: &HttpTarget,
    reference: &str,
    approval: &str,
) {
    v.run_pp(
        &[
            "add",
            "http",
            name,
            "--host",
            &target.base(),
            "--bearer",
            "--secret-from",
            reference,
            "--approval",
            approval,
        ],
        None,
    )
    .ok();
}

/// One `http_request` GET; the tool result.
pub fn get(p: &mut McpProc, id: i64, credential: &str, url: &str, wait_s: u64) -> Value {
    let r = p.call(
        id,
        "http_request",
        json!({"credential": credential, "method": "GET", "url": url, "wait_s": wait_s}),
    );
    assert!(r.get("error").is_none(), "JSON-RPC error: {r}");
    r["result"].clone()
}
