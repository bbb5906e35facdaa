//! The merges on their own: JSON members keep their place and text, TOML keeps every other line,
//! shapes that cannot be merged safely are refused, and Gemini CLI's trust rules are read as it
//! reads them. `tests/setup.rs` drives the command through the binary and the real clients.
use super::clients::{gemini_trust, Client, Trust};
use super::merge::{set_json, Node, Server};
use serde_json::{json, Value};
use std::path::Path;

fn server() -> Server {
    Server {
        name: "vault".into(),
        command: "/opt/bin/vault".into(),
        vault_dir: Some("/home/p/vault \"dir\"".into()),
        trust: false,
    }
}

fn render(client: Client, existing: &str) -> anyhow::Result<String> {
    client.render(Some(existing), Path::new("/cfg"), &server())
}

#[test]
fn json_members_keep_their_place_and_their_text() {
    let before = "{\n    \"zeta\" :  [1,2 ,3],\n    \"mcpServers\": {\n        \"other\": {\"command\":\"x\"},\n        \"vault\": {\"command\": \"stale\"},\n        \"last\": {}\n    },\n    \"alpha\": {\"deep\": {\"k\": \"\\u00e9\"}}\n}\n";
    let after = render(Client::Cursor, before).unwrap();
    for kept in [
        "    \"zeta\": [1,2 ,3],\n",
        "        \"other\": {\"command\":\"x\"},\n",
        "    \"alpha\": {\"deep\": {\"k\": \"\\u00e9\"}}\n",
    ] {
        assert!(after.contains(kept), "{kept:?} not kept in:\n{after}");
    }
    let order: Vec<usize> = ["zeta", "mcpServers", "other", "\"vault\"", "last", "alpha"]
        .iter()
        .map(|k| after.find(k).unwrap())
        .collect();
    assert!(order.is_sorted(), "members moved:\n{after}");
    assert!(
        after.contains("\n            \"command\": \"/opt/bin/vault\",\n"),
        "indented as the file is:\n{after}"
    );
    let v: Value = serde_json::from_str(&after).unwrap();
    assert_eq!(
        v["mcpServers"]["vault"],
        json!({"command": "/opt/bin/vault", "args": ["mcp"], "env": {"VAULT_DIR": "/home/p/vault \"dir\""}})
    );
    assert_eq!(render(Client::Cursor, &after).unwrap(), after, "idempotent");
}

#[test]
fn json_servers_are_added_where_missing_and_duplicates_of_ours_go() {
    let after = render(Client::Vscode, r#"{"inputs": []}"#).unwrap();
    let v: Value = serde_json::from_str(&after).unwrap();
    assert_eq!(v["inputs"], json!([]));
    assert_eq!(v["servers"]["vault"]["type"], "stdio");
    assert!(after.find("inputs").unwrap() < after.find("servers").unwrap());

    let twice =
        r#"{"mcpServers": {"vault": {"command": "a"}, "x": {}, "vault": {"command": "b"}}}"#;
    let after = render(Client::Claude, twice).unwrap();
    assert_eq!(after.matches("\"vault\"").count(), 1, "{after}");
    let v: Value = serde_json::from_str(&after).unwrap();
    assert_eq!(v["mcpServers"]["x"], json!({}));
    assert_eq!(v["mcpServers"]["vault"]["type"], "stdio");
}

#[test]
fn json_that_cannot_be_merged_is_refused_with_what_to_do() {
    for (text, says) in [
        ("{\"a\": 1,}", "not valid JSON"),
        ("// comment\n{}", "comments and trailing commas"),
        ("[1, 2]", "the file is an array"),
        (r#"{"mcpServers": "x"}"#, "`mcpServers` is a string"),
        (r#"{"mcpServers": null}"#, "`mcpServers` is null"),
        (r#"{"mcpServers": {}} trailing"#, "not valid JSON"),
    ] {
        let err = format!("{:#}", render(Client::Cursor, text).unwrap_err());
        assert!(err.contains(says), "{text}: {err}");
        assert!(
            err.contains("leaves it as it is") && err.contains("--print"),
            "{err}"
        );
    }
    assert_eq!(
        set_json(Some("  \n"), Path::new("/f"), &["k"], Node::New(json!(1))).unwrap(),
        "{\n  \"k\": 1\n}\n",
        "a blank file is an empty object"
    );
}

const CODEX: &str = "# my codex config\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\"\n\n[mcp_servers.vault]\ncommand = \"stale\"\n# about vault\n\n[mcp_servers.vault.env]\nA = \"b\"\n\n# the profiles\n[profiles.fast]\nmodel = \"x\" # fast\n";

#[test]
fn toml_table_is_replaced_in_place_and_every_other_line_kept() {
    let after = render(Client::Codex, CODEX).unwrap();
    let want = "# my codex config\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\"\n\n[mcp_servers.vault]\ncommand = \"/opt/bin/vault\"\nargs = [\"mcp\"]\nenv = { VAULT_DIR = \"/home/p/vault \\\"dir\\\"\" }\n# about vault\n\n# the profiles\n[profiles.fast]\nmodel = \"x\" # fast\n";
    assert_eq!(after, want);
    assert_eq!(render(Client::Codex, &after).unwrap(), after, "idempotent");
    let t: toml::Table = toml::from_str(&after).unwrap();
    assert_eq!(
        t["mcp_servers"]["vault"]["env"]["VAULT_DIR"].as_str(),
        Some("/home/p/vault \"dir\"")
    );
}

#[test]
fn toml_table_is_appended_when_missing_in_the_file_line_endings() {
    let before = "model = \"o3\"\r\n[profiles.fast]\r\nmodel = \"x\"";
    let after = render(Client::Codex, before).unwrap();
    assert!(after.starts_with(before), "{after:?}");
    assert!(after.ends_with("\r\n\r\n[mcp_servers.vault]\r\ncommand = \"/opt/bin/vault\"\r\nargs = [\"mcp\"]\r\nenv = { VAULT_DIR = \"/home/p/vault \\\"dir\\\"\" }\r\n"), "{after:?}");
    let quoted = "[\"mcp_servers\".'vault']\ncommand = \"stale\"\n";
    let after = render(Client::Codex, quoted).unwrap();
    assert!(
        after.starts_with("[mcp_servers.vault]\ncommand = \"/opt/bin/vault\"\n"),
        "{after}"
    );
    assert!(!after.contains("stale"));
}

#[test]
fn toml_entry_in_another_form_or_broken_toml_is_refused() {
    for (text, says) in [
        (
            "[mcp_servers]\nvault = { command = \"x\" }\n",
            "inline table or dotted keys",
        ),
        (
            "mcp_servers.vault.command = \"x\"\n",
            "inline table or dotted keys",
        ),
        (
            "notes = \"\"\"\n[mcp_servers.vault]\n\"\"\"\n",
            "inline table or dotted keys",
        ),
        ("[mcp_servers\n", "not valid TOML"),
        ("a = 1\na = 2\n", "not valid TOML"),
    ] {
        let err = format!("{:#}", render(Client::Codex, text).unwrap_err());
        assert!(err.contains(says), "{text:?}: {err}");
        assert!(err.contains("vault setup codex --print"), "{err}");
    }
}

#[test]
fn gemini_trust_is_read_as_gemini_reads_it() {
    let file = Path::new("/home/p/.gemini/trustedFolders.json");
    let folder = Path::new("/nonexistent-av/work/proj");
    let trust = |text: &str| gemini_trust(Some(text), file, folder).unwrap();
    match trust(r#"{"/elsewhere": "TRUST_FOLDER"}"#) {
        Trust::Add(text) => {
            let v: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(
                v,
                json!({"/elsewhere": "TRUST_FOLDER", "/nonexistent-av/work/proj": "TRUST_FOLDER"})
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        trust(r#"{"/nonexistent-av/work": "TRUST_FOLDER"}"#),
        Trust::Already("/nonexistent-av/work".into())
    );
    assert_eq!(
        trust(r#"{"/nonexistent-av/work/sibling": "TRUST_PARENT"}"#),
        Trust::Already("/nonexistent-av/work/sibling".into()),
        "TRUST_PARENT trusts the rule's parent"
    );
    assert_eq!(
        trust(
            r#"{"/nonexistent-av/work": "TRUST_FOLDER", "/nonexistent-av/work/proj": "DO_NOT_TRUST"}"#
        ),
        Trust::Refused("/nonexistent-av/work/proj".into()),
        "the longest rule wins"
    );
    assert_eq!(
        trust(r#"{"/nonexistent-av": "DO_NOT_TRUST", "/nonexistent-av/work": "TRUST_FOLDER"}"#),
        Trust::Already("/nonexistent-av/work".into())
    );
    assert!(
        matches!(
            trust(r#"{"/nonexistent-av/work/pro": "TRUST_FOLDER"}"#),
            Trust::Add(_)
        ),
        "a prefix of the name is not a parent"
    );
    let err = format!("{:#}", gemini_trust(Some("[]"), file, folder).unwrap_err());
    assert!(err.contains("leaves it as it is"), "{err}");
}
