//! The previews on the card of what the full view (`[v]`) shows whole: the query and headers (the
//! first few, then a count of the rest) and the body: its size (or, for JSON, its first fields on
//! one row when no line of the preview fits), its first lines behind a gutter, and a count of the
//! rest. Each is a line the layout may cut, and counts when it does.
use super::layout::{Emph, Line, Part};

/// Lines of the body the card shows before pointing at the full view.
const PREVIEW_LINES: usize = 12;
/// Query parameters, and headers, the card shows before pointing at the full view.
const PREVIEW_PAIRS: usize = 4;
/// Bytes of displayed body text the card shows before pointing at the full view.
const PREVIEW_BYTES: usize = 1024;
/// Lines of the body (its opening and first fields) that stay on a short terminal longer than
/// the query and headers.
const FIRST_LINES: usize = 4;

/// The first `PREVIEW_PAIRS` of `items` under `label` (shown once), then a line counting the
/// rest; each a line of `part` that the layout may cut (and count).
pub(super) fn previewed(label: &str, part: Part, items: &[String]) -> Vec<Line> {
    let mut out: Vec<Line> = items
        .iter()
        .take(PREVIEW_PAIRS)
        .enumerate()
        .map(|(i, text)| {
            let shown = if i == 0 { label } else { "" };
            Line::new(part, Emph::Plain, format!("  {shown:<11} {text}")).item()
        })
        .collect();
    if items.len() > PREVIEW_PAIRS {
        let n = items.len() - PREVIEW_PAIRS;
        out.push(
            Line::new(
                part,
                Emph::Plain,
                format!("  {:<11} … {n} more not shown here: [v] shows all", ""),
            )
            .hidden(n),
        );
    }
    out
}

/// Body lines behind a gutter, so no line of it can pass for a line of the card.
pub(super) fn gutter<'a>(lines: impl Iterator<Item = &'a str>) -> String {
    lines.map(|l| format!("              │ {l}\n")).collect()
}

/// A JSON body as shown (`show_body`, already escaped) on one line, `{"name": "x", "tags":
/// ["a"]}`: its first fields, for the card's one-row preview. Built from the first lines only.
fn one_line(shown: &str) -> String {
    let mut s = String::new();
    for l in shown.lines().map(str::trim) {
        if s.len() > 512 {
            break;
        }
        if !s.is_empty() && !s.ends_with(['{', '[']) && !l.starts_with(['}', ']']) {
            s.push(' ');
        }
        s.push_str(l);
    }
    s
}

/// Whether `raw` is JSON that `show_body` shows indented (it re-serializes to these bytes).
fn is_json(raw: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(raw)
        .is_ok_and(|v| serde_json::to_vec(&v).is_ok_and(|again| again == raw))
}

/// The body's lines on the card: its size (a JSON body's first fields instead, on one row, when
/// the terminal leaves no room for the preview), the preview behind the gutter, and a count of
/// the lines it does not preview. `shown` is the body as the card shows it (`CardData::shown_body`),
/// `raw` its bytes.
pub(super) fn body_lines(shown: Option<String>, raw: Option<&[u8]>) -> Vec<Line> {
    let (Some(body), Some(raw)) = (shown, raw) else {
        return Vec::new();
    };
    let total = body.lines().count();
    let mut head = Line::new(
        Part::BodyHead,
        Emph::Plain,
        format!("  body        {} bytes", raw.len()),
    )
    .clipped();
    if is_json(raw) {
        // With no line of the preview left, the body's first fields stand on its own line.
        head = head.instead(format!("  body {}", one_line(&body)));
    }
    let mut out = vec![head];
    let (mut shown, mut kept) = (0, 0);
    for line in body.lines().take(PREVIEW_LINES) {
        if shown + line.len() > PREVIEW_BYTES {
            break;
        }
        shown += line.len() + 1;
        kept += 1;
        let part = if kept <= FIRST_LINES {
            Part::BodyFirst
        } else {
            Part::Body
        };
        out.push(Line::new(part, Emph::Plain, gutter(std::iter::once(line)).trim_end()).item());
    }
    if kept < total {
        out.push(
            Line::new(
                Part::Body,
                Emph::Plain,
                format!("  … {} more lines: [v] shows all", total - kept),
            )
            .hidden(total - kept),
        );
    }
    out
}
