//! When one name is set in more than one of a client's scopes: Claude Code reads an MCP server
//! from your user config (`~/.claude.json`'s `mcpServers`), this folder's local entry in the same
//! file (`projects[folder].mcpServers`, what `claude mcp add` writes by default) and the project's
//! `.mcp.json`. With the same name in two of them it warns of conflicting scopes, and which one
//! wins depends on the scope rules of the day. `vault setup` says so at once and which to keep.
use super::clients::{Client, Places, Scope};
use serde_json::Value;

/// Where Claude Code has an entry named `name` for the folder `at.cwd`, by scope.
fn claude_scopes(name: &str, at: &Places) -> Vec<&'static str> {
    let read = |p: std::path::PathBuf| -> Option<Value> {
        serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
    };
    let has = |v: Option<&Value>| v.and_then(|s| s.get(name)).is_some();
    let mut found = Vec::new();
    let user = read(at.claude_config());
    if has(user.as_ref().and_then(|u| u.get("mcpServers"))) {
        found.push("user (~/.claude.json)");
    }
    let folder = at.cwd.to_string_lossy();
    let local = user
        .as_ref()
        .and_then(|u| u.get("projects"))
        .and_then(|p| p.get(folder.as_ref()))
        .and_then(|p| p.get("mcpServers"));
    if has(local) {
        found.push("local (this folder, in ~/.claude.json)");
    }
    if has(read(at.cwd.join(".mcp.json"))
        .as_ref()
        .and_then(|p| p.get("mcpServers")))
    {
        found.push("project (.mcp.json)");
    }
    found
}

/// The warning to print when `name` is now in more than one scope of `client`, with which entry
/// to keep and the command that removes the other.
pub(super) fn conflict(client: Client, scope: Scope, name: &str, at: &Places) -> Option<String> {
    if client != Client::Claude {
        return None;
    }
    let found = claude_scopes(name, at);
    if found.len() < 2 {
        return None;
    }
    let remove = match scope {
        Scope::Project => format!(
            "keep this project's .mcp.json (it is what teammates get) and remove your own: `claude mcp remove {name} -s user` and `claude mcp remove {name} -s local`"
        ),
        Scope::User => format!(
            "keep your user entry (one entry for every project) and remove the others here: `claude mcp remove {name} -s local`, and delete {name} from this folder's .mcp.json"
        ),
    };
    Some(format!(
        "Claude Code now finds {name} in {} scopes here: {}. It warns of conflicting scopes, and which one wins can change with its releases; {remove}.",
        found.len(),
        found.join(", ")
    ))
}
