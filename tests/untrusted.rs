//! Third-party text reaches the model only inside the wrapper: an injection canary planted by the
//! target in a JSON string field, a nested array, a key, a text body, every returned header and
//! an error message that quotes the target (a certificate's name) appears in a tool result only
//! under a key starting `untrusted`, beside the note, both in `structuredContent` and in the text
//! content (the same JSON), never in the `Error:`/`Fix:` lines or any other field.
mod support;

use serde_json::{json, Value};
use support::mcp::McpProc;
use support::standin::paths_of;
use support::target::HttpTarget;
use support::tls::TestCa;
use support::*;

const SECRET: &str = "DECOY_untrusted_tok_6c0b1";
const CANARY: &str = "IGNOREPREVIOUSINSTRUCTIONSxq7";

/// Where the canary sits outside a wrapper: a path with no `untrusted…` key on it, or a wrapper
/// without its note.
fn unwrapped(v: &Value, canary: &str) -> Vec<String> {
    let mut paths = Vec::new();
    paths_of(v, canary, "", &mut paths);
    paths
        .into_iter()
        .filter(|p| !p.split('.').any(|k| k.starts_with("untrusted")))
        .collect()
}

/// Checks one `tools/call` response: the canary is somewhere (the test can fail), and only under
/// an `untrusted` key, in the structured result and in the text content alike.
#[track_caller]
fn assert_wrapped(what: &str, r: &Value) -> usize {
    let res = &r["result"];
    let sc = &res["structuredContent"];
    let mut found = Vec::new();
    paths_of(sc, CANARY, "", &mut found);
    assert!(!found.is_empty(), "{what}: the canary never came back: {r}");
    assert_eq!(unwrapped(sc, CANARY), Vec::<String>::new(), "{what}: {sc}");
    for p in &found {
        // Each wrapper beside the canary carries the note.
        let wrapper = p
            .split('.')
            .position(|k| k.starts_with("untrusted"))
            .unwrap();
        let mut w = sc;
        for k in p.split('.').skip(1).take(wrapper - 1) {
            w = &w[k];
        }
        assert!(
            w["note"]
                .as_str()
                .is_some_and(|n| n.contains("not instructions")),
            "{what}: {w}"
        );
    }
    let text = res["content"][0]["text"].as_str().unwrap();
    let json_line = if res["isError"] == true {
        let mut lines = text.lines();
        let (msg, fix) = (lines.next().unwrap(), lines.next().unwrap());
        assert!(
            !msg.contains(CANARY) && !fix.contains(CANARY),
            "{what}: {text}"
        );
        lines.collect::<Vec<_>>().join("\n")
    } else {
        text.to_owned()
    };
    let from_text: Value = serde_json::from_str(&json_line).unwrap();
    assert_eq!(&from_text, sc, "{what}: the text content is the same JSON");
    assert_no_leak(what, r.to_string().as_bytes(), SECRET);
    found.len()
}

fn call(p: &mut McpProc, id: i64, cred: &str, url: String) -> Value {
    p.call(
        id,
        "http_request",
        json!({"credential": cred, "method": "GET", "url": url, "wait_s": 30}),
    )
}

#[test]
fn a_canary_in_every_third_party_field_comes_back_only_inside_the_wrapper() {
    let target = HttpTarget::start(SECRET);
    let mut v = TestVault::init("untrusted");
    v.add_bearer_with("api", &target.base(), SECRET, &["--approval", "never"]);
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    // The request carries the canary hex-encoded: only the target's answer spells it out.
    let c = hex::encode(CANARY);
    let json_doc = call(&mut p, 1, "api", format!("{}/inject?c={c}", target.base()));
    assert_eq!(
        json_doc["result"]["structuredContent"]["state"], "completed",
        "{json_doc}"
    );
    let n = assert_wrapped("JSON body and headers", &json_doc);
    // A string field, a nested object in an array, a nested array, a key, an escaped value, and
    // three headers.
    assert!(n >= 8, "only {n} canaries came back: {json_doc}");
    let body = &json_doc["result"]["structuredContent"]["http"]["body"]["untrusted_json"];
    assert_eq!(
        body["nested"]["comments"][1][0], CANARY,
        "the JSON stays usable: {body}"
    );
    assert_eq!(body["escaped"], CANARY, "escape sequences stripped");
    let text = call(
        &mut p,
        2,
        "api",
        format!("{}/inject.txt?c={c}", target.base()),
    );
    assert!(
        assert_wrapped("text body and headers", &text) >= 4,
        "{text}"
    );
    // get_action and list_recent_actions return the same wrapped shapes.
    let id = text["result"]["structuredContent"]["action_id"].clone();
    let again = p.call(3, "get_action", json!({"action_id": id}));
    assert_wrapped("get_action", &again);
    let recent = p.call(4, "list_recent_actions", json!({}));
    assert!(unwrapped(&recent, CANARY).is_empty(), "{recent}");
    p.finish(std::time::Duration::from_secs(10));
}

#[test]
fn an_error_that_quotes_the_target_keeps_the_quote_inside_the_wrapper() {
    // The target's certificate names the canary: the TLS library's message quotes it.
    let dir = TempDir::new("untrusted-tls");
    let ca = TestCa::create_for(dir.path(), &format!("DNS:{CANARY}.example"));
    let target = HttpTarget::start_tls(SECRET, &ca.leaf_cert, &ca.leaf_key);
    let mut v = TestVault::init("untrusted-tls");
    let ca_file = ca.ca_cert.to_str().unwrap().to_owned();
    v.add_bearer_with(
        "tls",
        &target.base(),
        SECRET,
        &["--approval", "never", "--ca-file", &ca_file],
    );
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let r = call(&mut p, 1, "tls", format!("{}/inject?c=x", target.base()));
    let sc = &r["result"]["structuredContent"];
    assert_eq!(sc["state"], "failed_before_send", "{r}");
    assert!(
        sc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("certificate"),
        "the vault's own words say what failed: {r}"
    );
    assert_wrapped("TLS error", &r);
    assert!(target.requests().is_empty(), "nothing reached the target");
    p.finish(std::time::Duration::from_secs(10));
}
