//! The demo's SSH action: an in-process SSH server (`ssh_target`, so no sshd is needed), a
//! password credential pinned to its host key, an `ssh_exec` that waits for a decision, the
//! command run only after it, and the password the server echoes scrubbed from the result.
use super::ssh_target::{Accept, SshTarget};
use super::{random_hex, step, wait_pending, Approver, DemoError, Mcp};
use crate::agent::client::Client;
use crate::credentials::{self, Approval, NewCredential, Secret, SshAuth, Target};
use crate::keys::KeyMaterial;
use serde_json::json;
use zeroize::Zeroizing;

/// Runs the SSH part of the demo through the vault agent (`cli` adds, `approver_conn` decides)
/// and the running `vault mcp`; whether the person approved it.
pub(super) fn run(
    paths: &crate::paths::VaultPaths,
    cli: &mut Client,
    approver_conn: &mut Client,
    keys: &KeyMaterial,
    mcp: &mut Mcp,
    approver: &mut Approver<'_>,
    say: &mut dyn FnMut(&str),
) -> Result<bool, DemoError> {
    let password = format!("demo-ssh-pw-{}", random_hex(8));
    let target = SshTarget::start("demo", Accept::Password(Zeroizing::new(password.clone())))
        .map_err(|e| step(format!("cannot start the in-process SSH server: {e}")))?;
    let host_key = target.host_key();
    super::add_credential(
        cli,
        keys,
        NewCredential {
            id: credentials::new_id("cred"),
            profile: "default".into(),
            name: "demo-ssh".into(),
            approval: Approval::Each,
            target: Target::Ssh(credentials::SshTarget {
                presence: crate::wire::touch::Presence::None,
                host: "127.0.0.1".into(),
                port: target.port,
                user: "demo".into(),
                host_key: host_key.clone(),
                auth: SshAuth::Password,
                allow_commands: vec![],
            }),
            secret: Secret::new(password.clone().into_bytes()),
        },
    )
    .map_err(|e| step(format!("vault add ssh: {e}")))?;
    say(&format!(
        "8. In-process SSH server on 127.0.0.1:{} (host key {host_key}); credential demo-ssh: password login, that host key pinned, approval each",
        target.port
    ));
    mcp.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "ssh_exec", "arguments": {"credential": "demo-ssh", "command": "login-info", "wait_s": 60}}}))?;
    let view = wait_pending(approver_conn)?;
    view.verified_request().map_err(step)?;
    let action = view.action.clone();
    say(&format!(
        "   The agent asked: {} (hash {}…); nothing runs until a decision",
        action.summary,
        &action.action_hash[..12]
    ));
    if !target.commands().is_empty() || target.logins() != 0 {
        return Err(step("the SSH server was contacted before any approval"));
    }
    let approved = super::decide(paths, approver, approver_conn, keys, &view, "", say)?;
    let answer = mcp.until(4)?;
    if answer.to_string().contains(&password) {
        return Err(step("the SSH password reached the agent's result"));
    }
    let result = &answer["result"]["structuredContent"];
    if !approved {
        if !target.commands().is_empty() {
            return Err(step("a denied SSH command ran"));
        }
        say("   Denied: the agent got an `Error:` result, and the server never saw a login or a command");
        return Ok(false);
    }
    if result["state"] != "completed" || target.commands() != ["login-info"] {
        return Err(step(format!(
            "expected the server to run login-info once and the action to complete, got {result}"
        )));
    }
    say(&format!(
        "   The server ran `login-info` once, exit status {}; the agent got back (the password it echoed is scrubbed): {}",
        result["ssh"]["exit_status"], result["ssh"]["stdout"]["untrusted_text"]
    ));
    Ok(true)
}
