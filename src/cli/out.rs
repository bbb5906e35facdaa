//! The one writer of results on stdout. A reader that went away (`vault log | head -1`) ends the
//! command as a success with nothing on stderr, as ripgrep does; any other write error is
//! reported. Tables are laid out by the width of what they hold.
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

#[cfg(test)]
mod tests {
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
