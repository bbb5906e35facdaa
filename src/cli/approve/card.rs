//! The approval card and its full view, rendered from plain data (`CardData`) with no I/O: what
//! the person reads before deciding. Everything that will be sent is on the card itself: the
//! method and URL, the whole query (one `name = value` line per parameter), every header the
//! agent supplied (`name: value`), and the body, readable (`term::show_body`) and cut only with a
//! count of what is hidden. A body too long for the full view to show whole makes the action
//! impossible to approve. Every agent-derived string goes through `term::escape`.
use crate::term::{escape, show_body, MAX_SHOWN_BODY_BYTES};
use serde_json::Value;

/// Lines of the body the card shows before pointing at the full view.
const PREVIEW_LINES: usize = 12;
/// Bytes of displayed body text the card shows before pointing at the full view.
const PREVIEW_BYTES: usize = 1024;

/// What a card shows about one pending action; filled by `screen.rs` from the vault.
#[derive(Debug, Clone, Default)]
pub(super) struct CardData {
    pub id: String,
    pub tool: String,
    pub credential: String,
    pub summary: String,
    pub action_hash: String,
    pub created_at: String,
    pub expires_at: String,
    pub client_name: String,
    pub client_version: String,
    pub parent_exe: String,
    /// The normalized action (what the hash covers).
    pub normalized: Value,
    pub body: Option<Vec<u8>>,
}

/// Terminal styling of the card (bold/dim off without colour).
#[derive(Debug, Clone, Copy)]
pub(super) struct Style {
    pub color: bool,
}

impl Style {
    fn codes(self) -> (&'static str, &'static str, &'static str) {
        if self.color {
            ("\x1b[1m", "\x1b[2m", "\x1b[0m")
        } else {
            ("", "", "")
        }
    }
}

impl CardData {
    /// The body as shown to a person, if any.
    fn shown_body(&self) -> Option<String> {
        self.body.as_deref().map(show_body)
    }

    /// `Err(why)` when the action must not be approved because the person cannot be shown all
    /// of it.
    pub(super) fn approvable(&self) -> Result<(), String> {
        if self.normalized.is_null() {
            return Err("does not carry a request that re-derives its hash, so it cannot be approved. Deny it ([d])".into());
        }
        match self.shown_body() {
            Some(b) if b.len() > MAX_SHOWN_BODY_BYTES => Err(format!(
                "its body takes {} bytes to show, more than the {MAX_SHOWN_BODY_BYTES} a full view shows whole, so it cannot be approved. Deny it ([d]) so the agent sends a smaller one",
                b.len()
            )),
            _ => Ok(()),
        }
    }

    /// The lines that say what will be sent: query, headers, or the SSH target and command.
    fn request_lines(&self) -> Vec<(String, String)> {
        let n = &self.normalized;
        let mut out = Vec::new();
        let text = |v: &Value| escape(v.as_str().unwrap_or("?"));
        match n["kind"].as_str() {
            Some("http") => {
                out.push(("method".into(), text(&n["method"])));
                out.push(("url".into(), text(&n["url"])));
                if let Ok(u) = url::Url::parse(n["url"].as_str().unwrap_or_default()) {
                    for (k, v) in u.query_pairs() {
                        out.push(("query".into(), format!("{} = {}", escape(&k), escape(&v))));
                    }
                }
                for pair in n["headers"].as_array().into_iter().flatten() {
                    out.push((
                        "headers".into(),
                        format!("{}: {}", text(&pair[0]), text(&pair[1])),
                    ));
                }
            }
            Some("ssh") => {
                out.push((
                    "host".into(),
                    format!(
                        "{}@{} port {}",
                        text(&n["user"]),
                        text(&n["host"]),
                        n["port"].as_u64().unwrap_or(0)
                    ),
                ));
                out.push(("host key".into(), text(&n["host_key"])));
                out.push(("command".into(), text(&n["command"])));
            }
            _ => out.push(("action".into(), escape(&n.to_string()))),
        }
        out
    }
}

/// Labelled lines, the label shown once per run of equal labels.
fn labelled(lines: &[(String, String)]) -> String {
    let mut s = String::new();
    let mut last = "";
    for (label, text) in lines {
        let shown = if label == last { "" } else { label.as_str() };
        s += &format!("  {shown:<11} {text}\n");
        last = label;
    }
    s
}

/// Body lines behind a gutter, so no line of it can pass for a line of the card.
fn gutter<'a>(lines: impl Iterator<Item = &'a str>) -> String {
    lines.map(|l| format!("              │ {l}\n")).collect()
}

/// `in 4 min 10 s` / `12 s ago` from a UTC timestamp.
fn until(ts: &str) -> String {
    let Ok(t) = ts.parse::<jiff::Timestamp>() else {
        return escape(ts);
    };
    let secs = t.duration_since(jiff::Timestamp::now()).as_secs();
    if secs >= 0 {
        format!("in {} min {} s", secs / 60, secs % 60)
    } else {
        format!("{} s ago", -secs)
    }
}

/// The card for the first of `waiting` actions, under a `note` (the last decision or refusal).
pub(super) fn card(d: &CardData, waiting: usize, style: Style, note: &str) -> String {
    let (bold, dim, reset) = style.codes();
    let mut s = format!(
        "\x1b[2J\x1b[H{dim}{}{reset}\n\n{bold}Action 1 of {waiting} waiting{reset}\n",
        escape(note)
    );
    let client = format!("{} {}", escape(&d.client_name), escape(&d.client_version));
    s += &format!(
        "  client      {}  ({})\n",
        client.trim(),
        escape(&d.parent_exe)
    );
    s += &format!(
        "  tool        {}\n  credential  {}\n",
        escape(&d.tool),
        escape(&d.credential)
    );
    s += &format!("  {bold}{}{reset}\n", escape(&d.summary));
    let lines: Vec<(String, String)> = d
        .request_lines()
        .into_iter()
        .filter(|(l, _)| l != "method" && l != "url")
        .collect();
    s += &labelled(&lines);
    if let Some(body) = d.shown_body() {
        let raw = d.body.as_ref().map_or(0, Vec::len);
        s += &format!("  body        ({raw} bytes)\n");
        let mut shown = 0;
        let mut kept = Vec::new();
        for line in body.lines().take(PREVIEW_LINES) {
            if shown + line.len() > PREVIEW_BYTES {
                break;
            }
            shown += line.len() + 1;
            kept.push(line);
        }
        s += &gutter(kept.into_iter());
        let hidden = body.len().saturating_sub(shown);
        if hidden > 0 {
            s += &format!(
                "              … {hidden} more bytes of the body not shown here: [v] shows all of it\n"
            );
        }
    }
    if let Err(why) = d.approvable() {
        s += &format!("  {bold}!! This action {why}.{reset}\n");
    }
    s += &format!(
        "  hash        {}…\n",
        &d.action_hash[..16.min(d.action_hash.len())]
    );
    s += &format!(
        "  asked       {}   expires {}\n\n",
        until(&d.created_at).replace("in 0 min 0 s", "just now"),
        until(&d.expires_at)
    );
    s += "[a]pprove once   [s] approve for this session   [d]eny   [v]iew in full   [q]uit\n";
    s
}

/// The full view, as lines: every field of the action in the card's form and the whole body.
pub(super) fn full_view(d: &CardData) -> Vec<String> {
    let n = &d.normalized;
    let mut s = format!("{}\n\n", escape(&d.summary));
    s += &format!(
        "  action      {}\n  hash        {}\n",
        escape(&d.id),
        escape(&d.action_hash)
    );
    s += &format!(
        "  credential  {} ({} version {})\n",
        escape(&d.credential),
        escape(n["credential"]["id"].as_str().unwrap_or("?")),
        n["credential"]["version"]
    );
    s += &labelled(&d.request_lines());
    s += &format!(
        "  timeout     {} s   output at most {} bytes\n",
        n["timeout_s"], n["max_output_bytes"]
    );
    match (d.shown_body(), &d.body) {
        (Some(body), Some(raw)) => {
            s += &format!(
                "  body        {} bytes, blake3 {}\n",
                raw.len(),
                escape(n["body_blake3"].as_str().unwrap_or("?"))
            );
            if let Err(why) = d.approvable() {
                s += &format!("  !! This action {why}.\n");
            } else {
                s += &gutter(body.lines());
            }
        }
        _ => s += "  body        (none)\n",
    }
    s.lines().map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn data(body: Option<&[u8]>) -> CardData {
        CardData {
            id: "act_1".into(),
            tool: "http_request".into(),
            credential: "api".into(),
            summary: "POST https://h/v1/x?a=1 (credential api)".into(),
            action_hash: "ab".repeat(32),
            client_name: "cli\u{202e}ent".into(),
            normalized: json!({"kind": "http", "method": "POST", "url": "https://h/v1/x?a=1&b=%1B",
                "headers": [["x-http-method-override", "DELETE"]], "credential": {"id": "cred_1", "version": 2},
                "body_blake3": "00", "timeout_s": 30, "max_output_bytes": 65536}),
            body: body.map(<[u8]>::to_vec),
            ..CardData::default()
        }
    }

    #[test]
    fn the_card_shows_headers_query_and_body_and_counts_what_it_hides() {
        let d = data(Some(br#"{"name":"harmless"}"#));
        let c = card(&d, 1, Style { color: false }, "note\u{1b}[2K");
        for want in [
            "x-http-method-override: DELETE",
            "a = 1",
            "b = \\u{1b}",
            "│ {",
            "\"name\": \"harmless\"",
            "cli\\u{202e}ent",
            "note\\u{1b}[2K",
        ] {
            assert!(c.contains(want), "{want}: {c}");
        }
        assert!(d.approvable().is_ok());
        let long = "x\n".repeat(2000);
        let d = data(Some(long.as_bytes()));
        let c = card(&d, 1, Style { color: false }, "");
        assert!(
            c.contains("3976 more bytes of the body not shown here"),
            "{c}"
        );
        assert_eq!(
            full_view(&d).iter().filter(|l| l.ends_with("│ x")).count(),
            2000
        );
        let huge = "y".repeat(MAX_SHOWN_BODY_BYTES + 1);
        let d = data(Some(huge.as_bytes()));
        assert!(d.approvable().is_err());
        assert!(card(&d, 1, Style { color: false }, "").contains("cannot be approved"));
    }
}
