//! The first day, second round (issue 48): each trap a new user met, from the README to a first
//! approved action, played as they met it: in a terminal where the screen is the evidence, or
//! through the command whose words promised more or less than the code does.
mod support;

use serde_json::json;
use support::mcp::McpProc;
use support::target::HttpTarget;
use support::*;

/// `vault scan` suggests `--secret-stdin` for a token found in `~/.npmrc`; a person pastes the
/// token at the terminal. It is asked for with a prompt and never shown: not on the screen, not
/// in the scrollback (the whole pty transcript is searched), and the vault stores exactly it.
#[test]
fn a_secret_pasted_at_a_terminal_for_secret_stdin_is_never_shown() {
    const TYPED: &str = "DECOY_typed_npm_token_4d2c";
    let target = HttpTarget::start("unused");
    let mut v = TestVault::init("typed-secret");
    let r = v.run_tty(
        &[
            "add",
            "http",
            "npm",
            "--host",
            &target.base(),
            "--bearer",
            "--approval",
            "never",
            "--secret-stdin",
        ],
        &[
            ("not shown", &format!("{TYPED}\r")),
            ("passphrase", &format!("{PASSPHRASE}\r")),
        ],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("Paste the secret"), "no prompt: {}", r.stdout);
    assert_no_leak("the terminal", r.stdout.as_bytes(), TYPED);
    assert_no_leak("the terminal", r.stderr.as_bytes(), TYPED);
    // What was stored is what was pasted: the target receives it.
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let url = format!("{}/echo", target.base());
    let got = p.call(
        1,
        "http_request",
        json!({"credential": "npm", "method": "GET", "url": url}),
    );
    assert_eq!(
        got["result"]["structuredContent"]["state"], "completed",
        "{got}"
    );
    assert_eq!(
        target.requests()[0]["headers"]["authorization"],
        format!("Bearer {TYPED}")
    );
    p.finish(std::time::Duration::from_secs(10));
}
