//! The approval card and its full view, rendered with no I/O from plain data (`CardData`, whose
//! facts `facts.rs` reads from the verified request): what the person reads before deciding.
//! Query, headers and body are previewed and capped on the card with a count of what is hidden
//! (the full view has all); the method and URL (or host and command) stand in bold and again
//! beside the keys. An action that cannot be approved says why, on the card and in the full view.
use super::facts::{grant_line, CardData};
use super::layout::{self, Emph, Line, Part};
use super::preview::{body_lines, gutter, previewed};
use crate::term::escape;
use crate::wire::NormalizedAction;

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

/// The card for the first of `waiting` actions, under a `note` (the last decision or refusal),
/// laid out for a terminal of `size` (`layout::render`). The tool, the credential, what runs
/// where, every warning and the keys are deciding lines: on screen at every size, or the card
/// says the terminal is too small and `Shown::fits` is false.
pub(super) fn card(
    d: &CardData,
    waiting: usize,
    style: Style,
    note: &str,
    size: layout::Size,
) -> layout::Shown {
    let client = format!("{} {}", escape(&d.client_name), escape(&d.client_version));
    let mut lines = vec![
        Line::new(Part::Top, Emph::Dim, escape(note)),
        Line::new(Part::Meta, Emph::Plain, ""),
        Line::new(
            Part::Top,
            Emph::Bold,
            format!("Action 1 of {waiting} waiting"),
        ),
        Line::new(
            Part::Top,
            Emph::Plain,
            format!(
                "  client      {}  ({}){}",
                client.trim(),
                escape(&d.parent_exe),
                if d.contained {
                    ", contained by vault run"
                } else {
                    ", NOT contained"
                }
            ),
        ),
        Line::new(
            Part::Top,
            Emph::Plain,
            format!("  tool        {}", escape(&d.tool)),
        )
        .deciding(),
        Line::new(
            Part::Top,
            Emph::Plain,
            format!("  credential  {}", d.credential()),
        )
        .deciding(),
    ];
    if d.touch {
        lines.push(
            Line::new(
                Part::Top,
                Emph::Bold,
                "  key touch   needed: after the PIN, touch your security key".to_owned(),
            )
            .deciding(),
        );
    }
    for line in d.change_lines() {
        lines.push(Line::new(Part::Change, Emph::Bold, format!("  {line}")).deciding());
    }
    for (part, emph, label, text) in d.what_runs() {
        let text = match label {
            "" => format!("  {text}"),
            label => format!("  {label:<11} {text}"),
        };
        lines.push(Line::new(part, emph, text).deciding());
    }
    // What `[s]` would cover decides it as much as what runs.
    lines.push(Line::new(Part::Top, Emph::Plain, grant_line(d)).deciding());
    let (query, headers) = d.query_and_headers();
    lines.extend(previewed("query", Part::Query, &query));
    lines.extend(previewed("headers", Part::Header, &headers));
    lines.extend(body_lines(d.shown_body(), d.body.as_deref()));
    if let Some(n) = d.withheld {
        let head = format!("  body        {n} bytes (too large to show)");
        lines.push(Line::new(Part::BodyHead, Emph::Plain, head).clipped());
    }
    if let Err(why) = d.approvable() {
        lines
            .push(Line::new(Part::Warn, Emph::Bold, format!("  !! This action {why}.")).deciding());
    }
    lines.push(Line::new(
        Part::Meta,
        Emph::Plain,
        format!(
            "  hash        {}…",
            &d.action_hash[..16.min(d.action_hash.len())]
        ),
    ));
    lines.push(Line::new(
        Part::Meta,
        Emph::Plain,
        format!(
            "  asked       {}   expires {}",
            until(&d.created_at).replace("in 0 min 0 s", "just now"),
            until(&d.expires_at)
        ),
    ));
    lines.push(Line::new(Part::Meta, Emph::Plain, ""));
    lines.push(Line::new(Part::Bottom, Emph::Bold, d.headline()));
    let keys = if size.cols >= 84 {
        "[a]pprove once   [s] approve for this session   [d]eny   [v]iew in full   [q]uit"
    } else {
        "[a]once [s]ession [d]eny [v]iew [q]uit"
    };
    lines.push(Line::new(Part::Bottom, Emph::Plain, keys).deciding());
    layout::render(lines, size, style.codes())
}

/// The full view, as lines: every field of the action in the card's form and the whole body.
pub(super) fn full_view(d: &CardData) -> Vec<String> {
    let mut s = format!("{}\n\n", d.headline());
    s += &format!(
        "  action      {}\n  hash        {}\n",
        escape(&d.id),
        escape(&d.action_hash)
    );
    s += &format!(
        "  credential  {} ({})\n",
        d.credential(),
        escape(d.credential_ref().map_or("?", |c| c.id.as_str())),
    );
    for line in d.change_lines() {
        s += &format!("  {line}\n");
    }
    let (query, headers) = d.query_and_headers();
    let mut request: Vec<(String, String)> = query
        .into_iter()
        .map(|q| ("query".to_owned(), q))
        .chain(headers.into_iter().map(|h| ("headers".to_owned(), h)))
        .collect();
    if let Some(NormalizedAction::Ssh(_)) = &d.normalized {
        for (_, _, label, text) in d.what_runs() {
            request.push((label.to_owned(), text));
        }
    }
    s += &labelled(&request);
    let limits = match &d.normalized {
        Some(NormalizedAction::Http(h)) => Some((h.timeout_s, h.max_output_bytes)),
        Some(NormalizedAction::Ssh(x)) => Some((x.timeout_s, x.max_output_bytes)),
        Some(NormalizedAction::Network(_)) | None => None,
    };
    if let Some((timeout, most)) = limits {
        s += &format!("  timeout     {timeout} s   output at most {most} bytes\n");
    }
    let body_hash = match &d.normalized {
        Some(NormalizedAction::Http(h)) => h.body_blake3.as_deref(),
        _ => None,
    };
    match (d.shown_body(), &d.body) {
        (Some(body), Some(raw)) => {
            s += &format!(
                "  body        {} bytes, blake3 {}\n",
                raw.len(),
                escape(body_hash.unwrap_or("?"))
            );
            if let Err(why) = d.approvable() {
                s += &format!("  !! This action {why}.\n");
            } else {
                s += &gutter(body.lines());
            }
        }
        _ => match d.withheld {
            Some(n) => {
                s += &format!(
                    "  body        {n} bytes, blake3 {} (too large to show)\n",
                    escape(body_hash.unwrap_or("?"))
                );
                if let Err(why) = d.approvable() {
                    s += &format!("  !! This action {why}.\n");
                }
            }
            None => s += "  body        (none)\n",
        },
    }
    s.lines().map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::protocol::{CredentialChange, FieldChange};
    use crate::term::MAX_SHOWN_BODY_BYTES;
    use serde_json::json;

    const BIG: layout::Size = layout::Size {
        cols: 120,
        rows: 40,
    };

    fn normalized(v: serde_json::Value) -> NormalizedAction {
        serde_json::from_value(v).expect("a normalized action")
    }

    fn data(body: Option<&[u8]>) -> CardData {
        CardData {
            id: "act_1".into(),
            tool: "http_request".into(),
            action_hash: "ab".repeat(32),
            client_name: "cli\u{202e}ent".into(),
            normalized: Some(normalized(
                json!({"kind": "http", "method": "POST", "url": "https://h/v1/x?a=1&b=%1B",
                "headers": [["x-http-method-override", "DELETE"]],
                "credential": {"id": "cred_1", "version": 2, "name": "api", "profile": "default"},
                "body_blake3": "00", "timeout_s": 30, "max_output_bytes": 65536}),
            )),
            body: body.map(<[u8]>::to_vec),
            ..CardData::default()
        }
    }

    #[test]
    fn the_card_shows_headers_query_and_body_and_counts_what_it_hides() {
        let d = data(Some(br#"{"name":"harmless"}"#));
        let c = card(&d, 1, Style { color: false }, "note\u{1b}[2K", BIG).text;
        for want in [
            "POST https://h:443/v1/x\n",
            "POST https://h/v1/x?a=1&b=%1B",
            "api (profile default, version 2)",
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
        // The method and URL stand again beside the keys.
        let prompt = c.lines().rev().nth(1).unwrap();
        assert_eq!(prompt, "POST https://h/v1/x?a=1&b=%1B", "{c}");
        assert!(d.approvable().is_ok());
        let long = "x\n".repeat(2000);
        let d = data(Some(long.as_bytes()));
        let c = card(&d, 1, Style { color: false }, "", BIG).text;
        assert!(c.contains("1988 more lines: [v] shows all"), "{c}");
        assert_eq!(
            full_view(&d).iter().filter(|l| l.ends_with("│ x")).count(),
            2000
        );
        let huge = "y".repeat(MAX_SHOWN_BODY_BYTES + 1);
        let d = data(Some(huge.as_bytes()));
        assert!(d.approvable().is_err());
        let c = card(&d, 1, Style { color: false }, "", BIG).text;
        let words = c.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(words.contains("cannot be approved"), "{c}");
    }

    /// A tool's upload past a frame's bound comes without its body: the card says how large it
    /// is and that it cannot be approved, in the card and in the full view.
    #[test]
    fn a_withheld_body_is_named_by_its_size_and_cannot_be_approved() {
        let d = CardData {
            withheld: Some(6_000_000),
            ..data(None)
        };
        let why = d.approvable().unwrap_err();
        assert!(
            why.contains("6000000 bytes") && why.contains("--approval never"),
            "{why}"
        );
        let c = card(&d, 1, Style { color: false }, "", BIG).text;
        let words = c.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            words.contains("body 6000000 bytes (too large to show)"),
            "{c}"
        );
        assert!(words.contains("cannot be approved"), "{c}");
        let full = full_view(&d).join("\n");
        assert!(
            full.contains("6000000 bytes, blake3 00 (too large to show)"),
            "{full}"
        );
        assert!(full.contains("cannot be approved"), "{full}");
    }

    #[test]
    fn a_network_card_names_the_host_and_what_s_would_cover() {
        let d = CardData {
            id: "act_2".into(),
            tool: "network".into(),
            action_hash: "cd".repeat(32),
            client_name: "claude (network)".into(),
            normalized: Some(normalized(
                json!({"kind": "network", "host": "registry.npmjs.org", "port": 443}),
            )),
            grant_for: std::time::Duration::from_secs(3600),
            ..CardData::default()
        };
        let c = card(&d, 1, Style { color: false }, "", BIG).text;
        for want in [
            "CONNECT registry.npmjs.org:443",
            "tool        network",
            "credential  none",
            "allow list does not name",
        ] {
            assert!(c.contains(want), "{want}: {c}");
        }
        assert!(d.approvable().is_ok());
        let s = grant_line(&d);
        assert!(
            s.contains("connections to exactly registry.npmjs.org:443; this session"),
            "{s}"
        );
    }

    #[test]
    fn sixty_headers_do_not_push_the_method_and_url_off_a_24_row_card() {
        let mut d = data(None);
        let Some(NormalizedAction::Http(h)) = &mut d.normalized else {
            unreachable!("data() is an HTTP request")
        };
        h.headers = (0..60).map(|i| (format!("x-h{i}"), "v".into())).collect();
        let q: Vec<String> = (0..40).map(|i| format!("q{i}=1")).collect();
        h.url = format!("https://h/v1/x?{}", q.join("&"));
        let c = card(
            &d,
            1,
            Style { color: false },
            "",
            layout::Size {
                cols: 120,
                rows: 24,
            },
        )
        .text;
        let lines: Vec<&str> = c.lines().collect();
        assert!(lines.len() <= 24, "{} lines: {c}", lines.len());
        assert!(
            lines[..8]
                .iter()
                .any(|l| l.contains("POST https://h:443/v1/x")),
            "{c}"
        );
        // What did not fit is counted, and the keys are the last line.
        assert!(c.contains("more") && c.contains("[v] shows all"), "{c}");
        assert!(lines.last().is_some_and(|l| l.contains("[q]uit")), "{c}");
        assert_eq!(
            full_view(&d).iter().filter(|l| l.contains("x-h")).count(),
            60
        );
    }

    #[test]
    fn text_the_agent_wrote_is_not_on_the_card_and_changes_are() {
        // An unverified request shows nothing of it, and cannot be approved.
        let mut d = data(None);
        d.normalized = None;
        let c = card(&d, 1, Style { color: false }, "", BIG).text;
        assert!(c.contains("does not match its hash"), "{c}");
        assert!(d.approvable().is_err());
        // SSH: user, host, port, pinned key, command, and its shell syntax named.
        let mut d = data(None);
        d.normalized = Some(normalized(
            json!({"kind": "ssh", "host": "10.0.0.5", "port": 22,
            "user": "deploy", "host_key": "SHA256:new", "command": "git pull; id",
            "timeout_s": 30, "max_output_bytes": 65536,
            "credential": {"id": "cred_1", "version": 5, "name": "web1", "profile": "ops"}}),
        ));
        d.changed = Some(CredentialChange {
            approved_version: 3,
            fields: vec![
                FieldChange {
                    field: "host_key".into(),
                    old: Some("SHA256:old".into()),
                    new: Some("SHA256:new".into()),
                },
                FieldChange {
                    field: "secret".into(),
                    old: None,
                    new: None,
                },
            ],
        });
        let c = card(&d, 1, Style { color: false }, "", BIG).text;
        for want in [
            "deploy@10.0.0.5:22\n",
            "git pull; id\n",
            "deploy@10.0.0.5:22 $ git pull; id",
            "SHA256:new (pinned)",
            "`;` runs a second command",
            "web1 (profile ops, version 5)",
            "changed since you last approved one of its actions (then version 3)",
            "host_key: SHA256:old → SHA256:new",
            "secret changed",
        ] {
            assert!(c.contains(want), "{want}: {c}");
        }
    }

    #[test]
    fn the_card_says_what_s_would_grant_before_it_is_pressed() {
        let mut d = data(None);
        d.grant_for = std::time::Duration::from_secs(3600);
        let Some(NormalizedAction::Http(h)) = &mut d.normalized else {
            unreachable!("data() is an HTTP request")
        };
        (h.method, h.url, h.headers, h.body_blake3) = (
            "GET".into(),
            "https://h/repos/acme/app/issues?page=2".into(),
            vec![],
            None,
        );
        let line = grant_line(&d);
        assert!(
            line.starts_with("  [s] covers  GET, HEAD at or under /repos/acme/app, any query; api version 2; this session, 60 min (to "),
            "{line}"
        );
        assert!(card(&d, 1, Style { color: false }, "", BIG)
            .text
            .contains(&line));
        // The POST of `data()`, with its rewriting header: exactly that.
        let line = grant_line(&data(Some(b"{}")));
        assert!(
            line.contains(
                "POST on exactly /v1/x (any query and body, with x-http-method-override: DELETE)"
            ),
            "{line}"
        );
        let mut d = data(None);
        d.normalized = None;
        assert!(grant_line(&d).contains("nothing"));
    }
}
