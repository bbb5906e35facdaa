//! The latency plot, written by hand: one panel per bench, a CDF per row on a log time axis.
use super::markdown::Row;
use std::fmt::Write as _;

const WIDTH: f64 = 1100.0;
const COLUMNS: usize = 2;
const PLOT_W: f64 = 430.0;
const PLOT_H: f64 = 210.0;
const LEFT: f64 = 60.0;
const TOP: f64 = 52.0;
const LINE: f64 = 17.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Round-number ticks within [lo, hi]: 1, 2, 5 × 10^k, fewer as the decades add up.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let decades = (hi / lo).log10();
    let steps: &[f64] = if decades <= 2.2 {
        &[1.0, 2.0, 5.0]
    } else if decades <= 3.5 {
        &[1.0, 3.0]
    } else {
        &[1.0]
    };
    let mut out = Vec::new();
    let mut decade = 10f64.powi(lo.log10().floor() as i32);
    while decade <= hi {
        for m in steps {
            let t = decade * m;
            if t >= lo && t <= hi {
                out.push(t);
            }
        }
        decade *= 10.0;
    }
    out
}

/// A tick's value in ms, as short as it gets (0.05, 2, 1000).
fn label(ms: f64) -> String {
    let s = format!("{ms:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// The CDF of `samples` at most `points` points: (value, fraction at or below it).
fn cdf(samples: &[f64], points: usize) -> Vec<(f64, f64)> {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let step = (n / points).max(1);
    let mut out: Vec<(f64, f64)> = (0..n)
        .step_by(step)
        .map(|i| (s[i], (i + 1) as f64 / n as f64))
        .collect();
    if out.last().is_some_and(|l| l.1 < 1.0) {
        out.push((s[n - 1], 1.0));
    }
    out
}

fn quantile(samples: &[f64], q: f64) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() as f64 - 1.0) * q).round() as usize]
}

pub(super) fn plot(panels: &[(String, Vec<Row>)], runs: usize, quick: bool) -> String {
    let legend_rows = |rows: &[Row]| rows.len() as f64 * LINE;
    let cell_h = |rows: &[Row]| TOP + PLOT_H + 42.0 + legend_rows(rows) + 18.0;
    let mut heights = Vec::new();
    for chunk in panels.chunks(COLUMNS) {
        heights.push(chunk.iter().map(|(_, r)| cell_h(r)).fold(0.0, f64::max));
    }
    let head = 56.0;
    let height = head + heights.iter().sum::<f64>() + 10.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">"##
    );
    let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="white"/>"##);
    let _ = writeln!(
        s,
        r##"<text x="20" y="28" font-size="17" font-weight="bold">Latency distributions (CDF), every bench that records samples</text>"##
    );
    let _ = writeln!(
        s,
        r##"<text x="20" y="46" fill="#555">{}{}; time in ms on a log axis; solid: the vault, dashed: its peer in the same run; dotted lines at p50 and p95</text>"##,
        if runs == 1 {
            "one run".to_owned()
        } else {
            format!("{runs} runs pooled")
        },
        if quick {
            " (QUICK MODE: not the benches' figures)"
        } else {
            ""
        }
    );
    let mut y0 = head;
    for (chunk, h) in panels.chunks(COLUMNS).zip(&heights) {
        for (c, (bench, rows)) in chunk.iter().enumerate() {
            panel(
                &mut s,
                20.0 + c as f64 * (WIDTH / COLUMNS as f64),
                y0,
                bench,
                rows,
            );
        }
        y0 += h;
    }
    s.push_str("</svg>\n");
    s
}

fn panel(s: &mut String, x0: f64, y0: f64, bench: &str, rows: &[Row]) {
    let (lo, hi) = rows
        .iter()
        .flat_map(|r| r.samples.iter().copied())
        .filter(|v| *v > 0.0)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    let (lo, hi) = (lo / 1.15, hi * 1.15);
    let (px, py) = (x0 + LEFT, y0 + TOP);
    let x = |v: f64| px + (v.max(lo).ln() - lo.ln()) / (hi.ln() - lo.ln()) * PLOT_W;
    let y = |f: f64| py + (1.0 - f) * PLOT_H;
    let _ = writeln!(
        s,
        r##"<text x="{}" y="{}" font-size="14" font-weight="bold">{}</text>"##,
        x0,
        y0 + 24.0,
        esc(bench)
    );
    // Grid and axes.
    // 100% is the frame's top edge, unlabelled (95% sits just below it).
    for f in [0.0, 0.25, 0.5, 0.75, 0.95] {
        let dash = if f == 0.5 || f == 0.95 {
            r##" stroke-dasharray="2,3""##
        } else {
            ""
        };
        let _ = writeln!(
            s,
            r##"<line x1="{px}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ccc"{dash}/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#444">{}%</text>"##,
            px + PLOT_W,
            px - 6.0,
            y(f) + 4.0,
            f * 100.0,
            yy = y(f)
        );
    }
    for t in ticks(lo, hi) {
        let xx = x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.1}" y1="{py}" x2="{xx:.1}" y2="{:.1}" stroke="#eee"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle" fill="#444">{}</text>"##,
            py + PLOT_H,
            py + PLOT_H + 16.0,
            label(t)
        );
    }
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" fill="#444">ms</text>"##,
        px + PLOT_W + 6.0,
        py + PLOT_H + 16.0
    );
    let _ = writeln!(
        s,
        r##"<rect x="{px}" y="{py}" width="{PLOT_W}" height="{PLOT_H}" fill="none" stroke="#888"/>"##
    );
    // One CDF per row, and its legend line.
    for (i, r) in rows.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let dash = if r.peer {
            r##" stroke-dasharray="6,3""##
        } else {
            ""
        };
        let mut d = String::new();
        let mut prev_f = 0.0;
        for (j, (v, f)) in cdf(&r.samples, 400).into_iter().enumerate() {
            if j == 0 {
                let _ = write!(d, "M{:.1},{:.1}", x(v), y(0.0));
            }
            let _ = write!(d, " L{:.1},{:.1} L{:.1},{:.1}", x(v), y(prev_f), x(v), y(f));
            prev_f = f;
        }
        let _ = writeln!(
            s,
            r##"<path d="{d}" fill="none" stroke="{color}" stroke-width="1.8"{dash}/>"##
        );
        let ly = py + PLOT_H + 40.0 + i as f64 * LINE;
        let _ = writeln!(
            s,
            r##"<line x1="{}" y1="{:.1}" x2="{}" y2="{:.1}" stroke="{color}" stroke-width="2.5"{dash}/><text x="{}" y="{:.1}">{} — p50 {} · p95 {} ms (n={})</text>"##,
            x0 + 4.0,
            ly - 4.0,
            x0 + 30.0,
            ly - 4.0,
            x0 + 36.0,
            ly,
            esc(&r.label),
            super::markdown::num(quantile(&r.samples, 0.5)),
            super::markdown::num(quantile(&r.samples, 0.95)),
            r.samples.len()
        );
    }
}
