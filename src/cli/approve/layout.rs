//! Fitting the approval card to the terminal: every line wrapped at word boundaries to the width
//! (continuations indented under their text), then, when the card is taller than the terminal,
//! the body preview, the request lines, the timestamps, the changes and the header shrink in
//! that order, each counted in a "[v] shows all" line. The key line and the method and URL
//! above it always stay on screen, and so does the first line that names the action.

/// Which part of the card a line belongs to: what gives way first when the terminal is short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    /// The note, the action count, who asked, the tool, the credential, the headline.
    Top,
    /// What changed in the credential since it was last approved.
    Change,
    /// Query and header lines.
    Request,
    /// The body's first line (its size).
    BodyHead,
    /// A line of the body preview.
    Body,
    /// A "this cannot be approved" warning: never dropped.
    Warn,
    /// Hash and times.
    Meta,
    /// The headline again and the keys: never dropped.
    Bottom,
}

/// Emphasis of a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Emph {
    Plain,
    Bold,
    Dim,
}

/// One logical line of the card (already escaped for the terminal).
#[derive(Debug, Clone)]
pub(super) struct Line {
    pub part: Part,
    pub emph: Emph,
    pub text: String,
}

impl Line {
    pub(super) fn new(part: Part, emph: Emph, text: impl Into<String>) -> Self {
        Self {
            part,
            emph,
            text: text.into(),
        }
    }
}

/// The terminal's size in characters.
#[derive(Debug, Clone, Copy)]
pub(super) struct Size {
    pub cols: usize,
    pub rows: usize,
}

/// The narrowest and shortest terminal the card is laid out for.
const MIN: Size = Size { cols: 30, rows: 8 };

/// Where the text of a line starts after its label (`  label       text`).
fn indent_of(text: &str) -> usize {
    let lead = text.len() - text.trim_start().len();
    if lead == 2 && text.len() > 14 && text.is_char_boundary(14) {
        let label = &text[2..14];
        if label.ends_with(' ') && !label.trim().is_empty() {
            return 14;
        }
    }
    if text.trim_start().starts_with('│') {
        return text
            .find('│')
            .map_or(lead, |i| text[..i].chars().count() + 2);
    }
    lead
}

/// `text` cut into pieces of at most `cols` characters, at a space where one falls in the last
/// two thirds of the piece, else mid-word; continuations start under the line's text.
pub(super) fn wrap(text: &str, cols: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= cols {
        return vec![text.to_owned()];
    }
    let indent = indent_of(text).min(cols / 2);
    let pad: String = " ".repeat(indent);
    let mut out = Vec::new();
    let mut start = 0;
    let mut first = true;
    while start < chars.len() {
        let room = if first { cols } else { cols - indent };
        let rest = chars.len() - start;
        if rest <= room {
            let piece: String = chars[start..].iter().collect();
            out.push(if first {
                piece
            } else {
                format!("{pad}{piece}")
            });
            break;
        }
        let window = &chars[start..start + room];
        let cut = window
            .iter()
            .rposition(|c| *c == ' ')
            .filter(|&i| i >= room / 3)
            .map_or(room, |i| i + 1);
        let piece: String = chars[start..start + cut].iter().collect();
        let piece = piece.trim_end().to_owned();
        out.push(if first {
            piece
        } else {
            format!("{pad}{piece}")
        });
        start += cut;
        while start < chars.len() && chars[start] == ' ' {
            start += 1;
        }
        first = false;
    }
    out
}

/// The card for a terminal of `size`: wrapped, shrunk to fit, styled, cleared first.
pub(super) fn render(
    lines: Vec<Line>,
    size: Size,
    codes: (&str, &str, &str),
    body_total: usize,
) -> String {
    let size = Size {
        cols: size.cols.max(MIN.cols),
        rows: size.rows.max(MIN.rows),
    };
    let budget = size.rows - 1;
    let rows_of = |l: &Line| wrap(&l.text, size.cols).len();
    let total = |ls: &[Line]| ls.iter().map(rows_of).sum::<usize>();
    let mut lines = lines;
    // Body preview lines go first (from the end), then request lines, then the rest in order;
    // what went is counted in one "more" line where it was.
    for part in [
        Part::Body,
        Part::Request,
        Part::Meta,
        Part::Change,
        Part::Top,
    ] {
        if total(&lines) <= budget {
            break;
        }
        let mut dropped = false;
        while total(&lines) + 1 > budget {
            let Some(i) = last_droppable(&lines, part) else {
                break;
            };
            lines.remove(i);
            dropped = true;
        }
        if dropped && part != Part::Top {
            let text = match part {
                Part::Body => {
                    let kept = lines.iter().filter(|l| l.part == Part::Body).count();
                    format!(
                        "  … {} more lines: [v] shows all",
                        body_total.saturating_sub(kept)
                    )
                }
                _ => "  … more: [v] shows all".to_owned(),
            };
            let part_more = if part == Part::Body {
                Part::BodyHead
            } else {
                part
            };
            lines.retain(|l| !(l.part == part_more && is_more(&l.text)));
            let at = first_after(&lines, part) + lines.iter().filter(|l| l.part == part).count();
            lines.insert(
                at.min(lines.len()),
                Line::new(Part::Warn, Emph::Plain, text),
            );
        }
    }
    // Whatever still does not fit is cut from the middle: the keys and the headline stay.
    let bottom: usize = lines
        .iter()
        .filter(|l| l.part == Part::Bottom)
        .map(rows_of)
        .sum();
    let (bold, dim, reset) = codes;
    let mut out = String::from("\x1b[2J\x1b[H");
    let mut used = 0;
    for l in &lines {
        let room = if l.part == Part::Bottom {
            budget
        } else {
            budget.saturating_sub(bottom)
        };
        for piece in wrap(&l.text, size.cols) {
            if used >= room {
                break;
            }
            let (on, off) = match l.emph {
                Emph::Plain => ("", ""),
                Emph::Bold => (bold, reset),
                Emph::Dim => (dim, reset),
            };
            out += &format!("{on}{piece}{off}\n");
            used += 1;
        }
    }
    out
}

/// A line that counts what is not shown.
fn is_more(text: &str) -> bool {
    text.trim_start().starts_with('…') && text.contains("[v]")
}

/// The last line of `part` that may go: never the line naming the action (`Action 1 of`), nor the
/// headline (both bold), nor a line counting what is not shown.
fn last_droppable(lines: &[Line], part: Part) -> Option<usize> {
    lines.iter().rposition(|l| {
        l.part == part && !(part == Part::Top && l.emph == Emph::Bold) && !is_more(&l.text)
    })
}

/// Where a part's lines start: after the last line of an earlier part.
fn first_after(lines: &[Line], part: Part) -> usize {
    let order = [
        Part::Top,
        Part::Change,
        Part::Request,
        Part::BodyHead,
        Part::Body,
        Part::Warn,
        Part::Meta,
        Part::Bottom,
    ];
    let pos = order.iter().position(|p| *p == part).unwrap_or(0);
    lines
        .iter()
        .rposition(|l| order[..pos].contains(&l.part))
        .map_or(0, |i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_wrap_at_spaces_under_their_text() {
        let w = wrap(
            "  headers     x-a: one two three four five six seven eight",
            40,
        );
        assert!(w.iter().all(|l| l.chars().count() <= 40), "{w:?}");
        assert_eq!(w[0], "  headers     x-a: one two three four");
        assert!(w[1].starts_with("              "), "{w:?}");
        let url = format!("GET https://h/{}", "a".repeat(100));
        let w = wrap(&url, 40);
        assert!(w.iter().all(|l| l.chars().count() <= 40), "{w:?}");
        assert_eq!(w.concat().replace(' ', ""), url.replace(' ', ""));
    }

    #[test]
    fn a_short_terminal_keeps_the_action_the_headline_and_the_keys() {
        let mut lines = vec![
            Line::new(Part::Top, Emph::Dim, "note"),
            Line::new(Part::Top, Emph::Bold, "Action 1 of 1 waiting"),
            Line::new(Part::Top, Emph::Plain, "  client      c"),
            Line::new(Part::Top, Emph::Bold, "  POST https://h/x"),
        ];
        for i in 0..10 {
            lines.push(Line::new(
                Part::Request,
                Emph::Plain,
                format!("  headers     h{i}: v"),
            ));
        }
        lines.push(Line::new(
            Part::BodyHead,
            Emph::Plain,
            "  body        40 lines",
        ));
        for i in 0..40 {
            lines.push(Line::new(
                Part::Body,
                Emph::Plain,
                format!("              │ line {i}"),
            ));
        }
        lines.push(Line::new(Part::Meta, Emph::Plain, "  hash        ab…"));
        lines.push(Line::new(Part::Bottom, Emph::Bold, "POST https://h/x"));
        lines.push(Line::new(
            Part::Bottom,
            Emph::Plain,
            "[a]once [s]ession [d]eny [v]iew [q]uit",
        ));
        let out = render(lines, Size { cols: 40, rows: 12 }, ("", "", ""), 40);
        let shown: Vec<&str> = out.trim_start_matches("\x1b[2J\x1b[H").lines().collect();
        assert!(shown.len() <= 11, "{shown:#?}");
        assert!(shown.iter().all(|l| l.chars().count() <= 40), "{shown:#?}");
        for want in [
            "Action 1 of 1",
            "POST https://h/x",
            "[q]uit",
            "40 more lines",
        ] {
            assert!(shown.iter().any(|l| l.contains(want)), "{want}: {shown:#?}");
        }
        assert_eq!(
            shown.last(),
            Some(&"[a]once [s]ession [d]eny [v]iew [q]uit")
        );
    }
}
