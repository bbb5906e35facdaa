//! Fitting the approval card to the terminal. Every line is wrapped at word boundaries to the
//! width (continuations under their text), or cut to one row when it is only a preview. A line
//! marked *deciding* (the tool, the credential, what runs and where, the warnings, the keys) is
//! never cut: when the card is taller than the terminal, the hash and times, the body preview
//! past its first fields, the headline's repeat beside the keys, the headers, the query, the body's first
//! fields, then who asked give way in that order (`CUT_ORDER`), and what was cut of the request is
//! counted on one "not shown" line. A JSON body never shows as its opening bracket alone. When even the deciding lines
//! do not fit, the card is not drawn: the screen says the terminal is too small and how many rows
//! it needs, and `Shown::fits` is false, which the key loop reads before `a` or `s` can count.

/// Which part of the card a line belongs to: where it stands, and when it gives way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    /// The note, the action count, who asked, the tool, the credential, the headline.
    Top,
    /// What changed in the credential since it was last approved.
    Change,
    /// Other lines about what is sent (the SSH host key, shell syntax).
    Request,
    /// A query parameter (or a count of those the card does not preview).
    Query,
    /// A header the agent supplied (or a count of those the card does not preview).
    Header,
    /// The body's first line: its size (and, for JSON, its first fields on one row).
    BodyHead,
    /// One of the first lines of the body preview: its opening and first fields, which stay
    /// longer than the rest of the preview (and than the query and headers).
    BodyFirst,
    /// A line of the body preview (or a count of the lines it does not preview).
    Body,
    /// A "this cannot be approved" warning.
    Warn,
    /// Hash and times.
    Meta,
    /// The headline again and the keys.
    Bottom,
}

/// The order in which parts give way (each from its last line up): lines of later parts are cut
/// only once every line of the earlier ones is gone. Deciding lines are never cut.
const CUT_ORDER: [Part; 11] = [
    Part::Meta,
    Part::Body,
    Part::Bottom,
    Part::Header,
    Part::Query,
    Part::BodyFirst,
    Part::Request,
    Part::Top,
    Part::BodyHead,
    Part::Change,
    Part::Warn,
];

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
    /// A fact the decision rests on: never cut. Where it does not fit, nothing can be approved.
    pub deciding: bool,
    /// How many query parameters, headers or body lines this line stands for: 1 for one shown
    /// here, N for a "… N more" line that counts those the card does not preview.
    pub items: usize,
    /// A "… N more" line: it shows nothing itself, it counts what is not shown.
    pub counts_hidden: bool,
    /// Cut to one row (ending in " …") instead of wrapped: a preview of what [v] shows whole.
    pub clip: bool,
    /// What the line says instead once every line of the body preview is cut (the body's line
    /// then carries the body's first fields itself).
    pub instead: Option<String>,
}

impl Line {
    pub(super) fn new(part: Part, emph: Emph, text: impl Into<String>) -> Self {
        Self {
            part,
            emph,
            text: text.into(),
            deciding: false,
            items: 0,
            counts_hidden: false,
            clip: false,
            instead: None,
        }
    }

    /// Marks the line as one the decision rests on: it stays on screen at every size, or the
    /// card says the terminal is too small and cannot be approved.
    pub(super) fn deciding(mut self) -> Self {
        self.deciding = true;
        self
    }

    /// The line shows one query parameter, header or body line.
    pub(super) fn item(mut self) -> Self {
        self.items = 1;
        self
    }

    /// The line counts `n` items of its part that the card does not preview.
    pub(super) fn hidden(mut self, n: usize) -> Self {
        self.items = n;
        self.counts_hidden = true;
        self
    }

    /// The line is cut to one row rather than wrapped.
    pub(super) fn clipped(mut self) -> Self {
        self.clip = true;
        self
    }

    /// The line says `text` instead once no line of the body preview is left on the card.
    pub(super) fn instead(mut self, text: impl Into<String>) -> Self {
        self.instead = Some(text.into());
        self
    }
}

/// The terminal's size in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Size {
    pub cols: usize,
    pub rows: usize,
}

/// A card laid out for one terminal size: the text to draw, and whether every deciding line is
/// in it. The key loop keeps this and lets `a`/`s` count only when `fits` and the terminal still
/// has `size`.
#[derive(Debug, Clone)]
pub(super) struct Shown {
    pub text: String,
    pub size: Size,
    pub fits: bool,
}

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

/// Below this width a continuation is indented by at most `NARROW_INDENT`, not under the text
/// after a label: on a narrow terminal the rows are worth more than the alignment.
const NARROW: usize = 60;
const NARROW_INDENT: usize = 4;

/// `text` cut into pieces of at most `cols` characters, at a space where one falls in the last
/// two thirds of the piece, else mid-word; continuations start under the line's text (on a
/// terminal narrower than `NARROW`, at most `NARROW_INDENT` in).
pub(super) fn wrap(text: &str, cols: usize) -> Vec<String> {
    let cols = cols.max(1);
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= cols {
        return vec![text.to_owned()];
    }
    let most = if cols < NARROW {
        NARROW_INDENT
    } else {
        cols / 2
    };
    let indent = indent_of(text).min(most).min(cols / 2);
    let pad: String = " ".repeat(indent);
    let mut out = Vec::new();
    let mut start = 0;
    let mut first = true;
    while start < chars.len() {
        let room = if first { cols } else { cols - indent };
        // The first piece is not cut between its label and its text.
        let least = if first {
            (room / 3).max(indent_of(text).min(cols / 2))
        } else {
            room / 3
        };
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
            .filter(|&i| i >= least)
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

/// `text` on one row of `cols`: whole if it fits, else cut (at a space where one falls in the
/// last third) and ended with " …", so no word is shown cut in two.
fn clip(text: &str, cols: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= cols {
        return text.to_owned();
    }
    let room = cols.saturating_sub(2);
    let cut = chars[..room]
        .iter()
        .rposition(|c| *c == ' ')
        .filter(|&i| i >= room * 2 / 3)
        .unwrap_or(room);
    let kept: String = chars[..cut].iter().collect();
    format!("{} …", kept.trim_end())
}

/// The rows a line takes at `cols`.
fn rows(l: &Line, cols: usize) -> Vec<String> {
    if l.clip {
        vec![clip(&l.text, cols)]
    } else {
        wrap(&l.text, cols)
    }
}

/// What was cut of the request, for the "not shown" line.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Hidden {
    query: usize,
    headers: usize,
    body_lines: usize,
    body: bool,
}

impl Hidden {
    fn add(&mut self, l: &Line) {
        match l.part {
            Part::Query => self.query += l.items,
            Part::Header => self.headers += l.items,
            Part::Body | Part::BodyFirst => self.body_lines += l.items,
            Part::BodyHead => self.body = true,
            _ => {}
        }
    }

    /// `  … not shown: query 3, headers 6, body 40 lines: [v] shows all`, if anything was cut.
    fn line(self) -> Option<Line> {
        let mut what = Vec::new();
        if self.query > 0 {
            what.push(format!("query {}", self.query));
        }
        if self.headers > 0 {
            what.push(format!("headers {}", self.headers));
        }
        if self.body {
            what.push("the body".to_owned());
        } else if self.body_lines > 0 {
            let s = if self.body_lines == 1 { "" } else { "s" };
            what.push(format!("body {} line{s}", self.body_lines));
        }
        (!what.is_empty()).then(|| {
            Line::new(
                Part::Warn,
                Emph::Plain,
                format!("  … not shown: {}: [v] shows all", what.join(", ")),
            )
        })
    }
}

/// The lines kept for a terminal of `size` (with the "not shown" line in place), or `Err(rows
/// needed at this width)` when the deciding lines alone do not fit.
fn fit(lines: &[Line], size: Size) -> Result<Vec<Line>, usize> {
    let budget = size.rows.saturating_sub(1);
    let mut kept = vec![true; lines.len()];
    let mut hidden = Hidden::default();
    // The "not shown" line stands where the first line that gave way for it stood.
    let mut first_cut: Option<usize> = None;
    let assemble = |kept: &[bool], hidden: Hidden, first_cut: Option<usize>| -> Vec<Line> {
        let body_left = lines
            .iter()
            .zip(kept)
            .any(|(l, &k)| k && matches!(l.part, Part::Body | Part::BodyFirst) && !l.counts_hidden);
        let mut out = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            if Some(i) == first_cut {
                out.extend(hidden.line());
            }
            if kept[i] {
                let mut l = l.clone();
                if let Some(text) = l.instead.take().filter(|_| !body_left) {
                    l.text = text;
                }
                out.push(l);
            }
        }
        out
    };
    let height = |ls: &[Line]| ls.iter().map(|l| rows(l, size.cols).len()).sum::<usize>();
    let cut = |i: usize, kept: &mut Vec<bool>, hidden: &mut Hidden, first: &mut Option<usize>| {
        kept[i] = false;
        hidden.add(&lines[i]);
        if matches!(
            lines[i].part,
            Part::Query | Part::Header | Part::Body | Part::BodyFirst | Part::BodyHead
        ) {
            *first = Some(first.map_or(i, |f| f.min(i)));
        }
    };
    for part in CUT_ORDER {
        loop {
            if height(&assemble(&kept, hidden, first_cut)) <= budget {
                return Ok(assemble(&kept, hidden, first_cut));
            }
            let Some(i) = (0..lines.len())
                .rev()
                .find(|&i| kept[i] && lines[i].part == part && !lines[i].deciding)
            else {
                break;
            };
            cut(i, &mut kept, &mut hidden, &mut first_cut);
            // Once one line of a preview is cut, its "… N more" count joins the one line that
            // counts everything not shown.
            for j in 0..lines.len() {
                if kept[j] && lines[j].part == part && lines[j].counts_hidden && !lines[j].deciding
                {
                    cut(j, &mut kept, &mut hidden, &mut first_cut);
                }
            }
            // A JSON body is never shown as its opening bracket alone: its first fields are on
            // the body's own line (`BodyHead`).
            if matches!(part, Part::Body | Part::BodyFirst) {
                let left: Vec<usize> = (0..lines.len())
                    .filter(|&j| {
                        kept[j]
                            && matches!(lines[j].part, Part::Body | Part::BodyFirst)
                            && !lines[j].deciding
                    })
                    .collect();
                if let [only] = left[..] {
                    if is_opening_bracket(&lines[only].text) {
                        cut(only, &mut kept, &mut hidden, &mut first_cut);
                    }
                }
            }
        }
    }
    let all = assemble(&kept, hidden, first_cut);
    let need = height(&all);
    if need <= budget {
        Ok(all)
    } else {
        Err(need + 1)
    }
}

/// A body line (behind its gutter) that is only `{` or `[`.
fn is_opening_bracket(text: &str) -> bool {
    let content = text.rsplit('│').next().unwrap_or(text).trim();
    content == "{" || content == "["
}

/// The card for a terminal of `size`: wrapped, cut to fit, styled, cleared first; or, when its
/// deciding lines do not fit, a screen that says so (and `fits: false`).
pub(super) fn render(lines: Vec<Line>, size: Size, codes: (&str, &str, &str)) -> Shown {
    let (bold, dim, reset) = codes;
    let mut out = String::from("\x1b[2J\x1b[H");
    let fitted = fit(&lines, size);
    let fits = fitted.is_ok();
    let shown: Vec<(String, Emph)> = match fitted {
        Ok(kept) => kept
            .iter()
            .flat_map(|l| rows(l, size.cols).into_iter().map(move |r| (r, l.emph)))
            .collect(),
        Err(need) => too_small(size, need)
            .into_iter()
            .map(|t| (t, Emph::Plain))
            .collect(),
    };
    for (row, emph) in shown.into_iter().take(size.rows.saturating_sub(1).max(1)) {
        let (on, off) = match emph {
            Emph::Plain => ("", ""),
            Emph::Bold => (bold, reset),
            Emph::Dim => (dim, reset),
        };
        out += &format!("{on}{row}{off}\n");
    }
    Shown {
        text: out,
        size,
        fits,
    }
}

/// What the screen says when the deciding lines need `need` rows and the terminal has fewer.
fn too_small(size: Size, need: usize) -> Vec<String> {
    let text = format!(
        "Terminal too small ({}x{}) for this card: what decides it needs {need} rows at this width. [a] and [s] do nothing until it is larger. [d]eny [v]iew [q]uit",
        size.cols, size.rows
    );
    wrap(&text, size.cols)
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
        assert!(w[1].starts_with("    five"), "narrow: a short indent {w:?}");
        let w = wrap(&format!("  headers     x-a: {}", "word ".repeat(20)), 70);
        assert!(
            w[1].starts_with("              word"),
            "under the text {w:?}"
        );
        let url = format!("GET https://h/{}", "a".repeat(100));
        let w = wrap(&url, 40);
        assert!(w.iter().all(|l| l.chars().count() <= 40), "{w:?}");
        assert_eq!(w.concat().replace(' ', ""), url.replace(' ', ""));
        assert_eq!(
            clip("  body  {\"a\": 1, \"bb\": 2}", 20),
            "  body  {\"a\": 1, …"
        );
        assert!(clip(&"x".repeat(50), 20).chars().count() <= 20);
    }

    /// A card of every part: 10 headers, a 40-line body, deciding lines at the top and bottom.
    fn lines() -> Vec<Line> {
        let mut lines = vec![
            Line::new(Part::Top, Emph::Dim, "note"),
            Line::new(Part::Top, Emph::Bold, "Action 1 of 1 waiting"),
            Line::new(Part::Top, Emph::Plain, "  client      c"),
            Line::new(Part::Top, Emph::Plain, "  tool        http_request").deciding(),
            Line::new(Part::Top, Emph::Bold, "  POST https://h:443/x").deciding(),
        ];
        for i in 0..10 {
            lines.push(
                Line::new(Part::Header, Emph::Plain, format!("  headers     h{i}: v")).item(),
            );
        }
        lines
            .push(Line::new(Part::BodyHead, Emph::Plain, "  body  40 lines: {\"a\": 1}").clipped());
        lines.push(Line::new(Part::BodyFirst, Emph::Plain, "              │ {").item());
        for i in 0..39 {
            let part = if i < 3 { Part::BodyFirst } else { Part::Body };
            lines.push(Line::new(part, Emph::Plain, format!("              │ line {i}")).item());
        }
        lines.push(Line::new(Part::Meta, Emph::Plain, "  hash        ab…"));
        lines.push(Line::new(Part::Bottom, Emph::Bold, "POST https://h:443/x"));
        lines.push(
            Line::new(
                Part::Bottom,
                Emph::Plain,
                "[a]once [s]ession [d]eny [v]iew [q]uit",
            )
            .deciding(),
        );
        lines
    }

    fn screen(s: &Shown) -> Vec<&str> {
        s.text.trim_start_matches("\x1b[2J\x1b[H").lines().collect()
    }

    #[test]
    fn a_short_terminal_keeps_every_deciding_line_and_counts_what_it_cut() {
        for (cols, rows) in [(80, 24), (50, 15), (40, 12), (30, 8)] {
            let size = Size { cols, rows };
            let shown = render(lines(), size, ("", "", ""));
            let s = screen(&shown);
            assert!(shown.fits, "{cols}x{rows}: {s:#?}");
            assert!(s.len() < rows, "{cols}x{rows}: {s:#?}");
            assert!(s.iter().all(|l| l.chars().count() <= cols), "{s:#?}");
            for want in ["http_request", "POST https://h:443/x", "[q]uit"] {
                assert!(s.iter().any(|l| l.contains(want)), "{want}: {s:#?}");
            }
            assert!(
                s.last().is_some_and(|l| l.ends_with("[v]iew [q]uit")),
                "{s:#?}"
            );
            // What was cut is counted on one line, in place of the first line cut.
            let joined = s.join(" ").split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(joined.contains("not shown:"), "{s:#?}");
            assert!(joined.contains("[v] shows all"), "{s:#?}");
            // The body is never shown as `{` alone.
            let body: Vec<&&str> = s.iter().filter(|l| l.contains('│')).collect();
            assert!(body.len() != 1 || !body[0].ends_with('{'), "{s:#?}");
        }
        // 80x24: the first body lines after `{` are on it, and the count is exact.
        let s = render(lines(), Size { cols: 80, rows: 24 }, ("", "", ""));
        let text = s.text;
        assert!(text.contains("│ line 0"), "{text}");
        let kept = text.lines().filter(|l| l.contains('│')).count();
        assert!(
            text.contains(&format!("body {} lines", 40 - kept)),
            "{text}"
        );
    }

    #[test]
    fn where_the_deciding_lines_do_not_fit_the_card_says_so_and_does_not_fit() {
        let shown = render(lines(), Size { cols: 30, rows: 5 }, ("", "", ""));
        assert!(!shown.fits);
        let s = screen(&shown);
        assert!(s.len() < 5, "{s:#?}");
        let joined = s.join(" ");
        assert!(joined.contains("too small"), "{s:#?}");
        // Narrow and short: it says how many rows it needs, and it does not draw the card.
        let shown = render(lines(), Size { cols: 12, rows: 40 }, ("", "", ""));
        assert!(
            shown.fits,
            "12 columns, 40 rows: the deciding lines wrap and fit"
        );
        let shown = render(lines(), Size { cols: 12, rows: 8 }, ("", "", ""));
        assert!(!shown.fits);
        let joined = screen(&shown).join(" ");
        assert!(joined.contains("too small"), "{joined}");
        assert!(!joined.contains("POST"), "{joined}");
    }
}
