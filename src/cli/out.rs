//! The one writer of results on stdout. A reader that went away (`vault log | head -1`) ends the
//! command as a success with nothing on stderr, as ripgrep does; any other write error is
//! reported. Tables are laid out by the width of what they hold. Progress and advice go to
//! stderr (`note`).
use std::fmt;
use std::io::{self, Write};

/// Stdout was closed by its reader: the command stops and exits 0 quietly (`super::main`).
#[derive(Debug, thiserror::Error)]
#[error("stdout was closed by its reader")]
pub(super) struct StdoutClosed;

/// Writes one line (what `outln!` expands to).
pub(super) fn line(args: fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    written(
        out.write_fmt(args)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush()),
    )
}

/// Writes bytes as they are: a generated script or page, which ends its own lines.
pub(super) fn raw(bytes: &[u8]) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    written(out.write_all(bytes).and_then(|()| out.flush()))
}

fn written(result: io::Result<()>) -> anyhow::Result<()> {
    match result {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        Err(e) => Err(anyhow::anyhow!(
            "cannot write the result to stdout: {e}; check where stdout goes (a full disk?)"
        )),
    }
}

/// Writes one line of progress or advice on stderr (never a result); a failed write is ignored.
pub(super) fn note(args: fmt::Arguments<'_>) {
    let mut err = io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.write_all(b"\n"));
}

/// The width results should fit: the terminal's when stdout is one (or `$COLUMNS` when set);
/// `None` (no limit) for a pipe or a file, so scripts get every character.
pub(super) fn width() -> Option<usize> {
    if let Some(n) = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()) {
        return Some(n).filter(|&n: &usize| n > 0);
    }
    use std::io::IsTerminal;
    if !io::stdout().is_terminal() {
        return None;
    }
    rustix::termios::tcgetwinsize(io::stdout())
        .ok()
        .map(|w| usize::from(w.ws_col))
        .filter(|&n| n > 0)
}

/// `s` cut to `max` characters by replacing its middle with `…` (a long path keeps its start and
/// its file name).
pub(super) fn middle(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_owned();
    }
    if max < 2 {
        return "…".chars().take(max).collect();
    }
    let head = (max - 1) / 2;
    let tail = max - 1 - head;
    let start: String = s.chars().take(head).collect();
    let end: String = s.chars().skip(n - tail).collect();
    format!("{start}…{end}")
}

/// `table`, its widest columns (never the first) cut in the middle until a line fits `width`.
pub(super) fn table_fit(rows: &[Vec<String>], width: Option<usize>) -> Vec<String> {
    let Some(width) = width else {
        return table(rows);
    };
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let total = |w: &[usize]| w.iter().sum::<usize>() + 2 * w.len().saturating_sub(1);
    while total(&widths) > width {
        let Some((c, &w)) = widths
            .iter()
            .enumerate()
            .skip(1)
            .max_by_key(|(_, w)| **w)
            .filter(|(_, w)| **w > 8)
        else {
            break;
        };
        widths[c] = (w - (total(&widths) - width)).max(8);
    }
    let cut: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            r.iter()
                .enumerate()
                .map(|(c, cell)| middle(cell, widths[c]))
                .collect()
        })
        .collect();
    table(&cut)
}

/// Lays out rows (the first is the header) in columns as wide as their widest cell, two spaces
/// apart; the last column is not padded. Cells are already escaped for the terminal.
pub(super) fn table(rows: &[Vec<String>]) -> Vec<String> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width = |c: usize| {
        rows.iter()
            .filter_map(|r| r.get(c))
            .map(|cell| cell.chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..columns).map(width).collect();
    rows.iter()
        .map(|r| {
            let mut line = String::new();
            for (c, cell) in r.iter().enumerate() {
                if c + 1 == r.len() {
                    line.push_str(cell);
                } else {
                    let pad = widths[c] - cell.chars().count();
                    line.push_str(cell);
                    line.push_str(&" ".repeat(pad + 2));
                }
            }
            line
        })
        .collect()
}

/// A stored RFC 3339 UTC time as a person reads it: local time with its offset
/// (`2026-12-03 14:05:09 +01:00`); the text as it is if it does not parse.
pub(super) fn local_time(ts: &str) -> String {
    ts.parse::<jiff::Timestamp>()
        .map(|t| {
            t.to_zoned_datetime(jiff::tz::TimeZone::system())
                .strftime("%Y-%m-%d %H:%M:%S %:z")
                .to_string()
        })
        .unwrap_or_else(|_| ts.to_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_table_too_wide_cuts_its_widest_column_in_the_middle() {
        let rows = vec![
            vec!["ID".into(), "PARENT".into(), "END".into()],
            vec![
                "ses_1".into(),
                "/home/me/.local/lib/node_modules/@anthropic-ai/claude-code/cli.js".into(),
                "eof".into(),
            ],
        ];
        let lines = super::table_fit(&rows, Some(40));
        assert!(lines.iter().all(|l| l.chars().count() <= 40), "{lines:#?}");
        assert!(
            lines[1].contains("/home/me") && lines[1].contains("cli.js") && lines[1].contains('…')
        );
        assert_eq!(super::table_fit(&rows, None), super::table(&rows));
    }

    #[test]
    fn columns_are_as_wide_as_their_widest_cell() {
        let rows = vec![
            vec!["NAME".into(), "PARENT".into(), "END".into()],
            vec!["a".into(), "/usr/lib/a-very-long/parent".into(), "x".into()],
            vec!["ünï".into(), "p".into(), "y".into()],
        ];
        assert_eq!(
            super::table(&rows),
            [
                "NAME  PARENT                       END",
                "a     /usr/lib/a-very-long/parent  x",
                "ünï   p                            y",
            ]
        );
    }
}
