//! The report's text: `BENCHMARKS.md` from the runs (each bench's rows over its runs: medians,
//! spreads, the ratio to the peer of the same run, every goal with the runs that met it), and
//! the rows the plot draws (`svg.rs`).
use super::*;

pub(super) struct Report<'a> {
    pub(super) o: &'a Options,
    pub(super) benches: &'a [String],
    pub(super) runs: &'a BTreeMap<&'a str, Vec<Run>>,
    pub(super) when: jiff::Timestamp,
    pub(super) build: Duration,
    pub(super) run_time: Duration,
    pub(super) machine: Vec<(String, String)>,
    pub(super) failed: &'a [String],
}

/// One row of a bench, over its runs.
pub(super) struct Row {
    pub(super) label: String,
    pub(super) kind: String,
    pub(super) unit: String,
    pub(super) peer: bool,
    pub(super) vs: Option<String>,
    /// Per run: the headline (p50, or the figure), p95 (latencies), n, samples.
    pub(super) values: Vec<f64>,
    pub(super) p95: Vec<f64>,
    pub(super) n: Vec<u64>,
    pub(super) samples: Vec<f64>,
    /// Per run, for a goal: met.
    pub(super) met: Vec<bool>,
    /// Per run: headline / the peer's headline of the same run.
    pub(super) ratios: Vec<f64>,
}

/// The rows of one bench (goals included, `kind` "goal"), in the order they were first recorded.
fn rows(runs: &[Run]) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    for run in runs.iter().filter(|r| r.ok) {
        let headline = |label: &str| {
            run.records
                .iter()
                .find(|r| r["row"] == label && r["kind"] != "goal")
                .and_then(|r| r["p50"].as_f64().or_else(|| r["value"].as_f64()))
        };
        for r in &run.records {
            let label = r["row"].as_str().unwrap_or("?").to_owned();
            let kind = r["kind"].as_str().unwrap_or("?").to_owned();
            let i = match rows.iter().position(|x| x.label == label && x.kind == kind) {
                Some(i) => i,
                None => {
                    rows.push(Row {
                        label,
                        kind,
                        unit: r["unit"].as_str().unwrap_or("").to_owned(),
                        peer: r["peer"] == true,
                        vs: r["vs"].as_str().map(str::to_owned),
                        values: vec![],
                        p95: vec![],
                        n: vec![],
                        samples: vec![],
                        met: vec![],
                        ratios: vec![],
                    });
                    rows.len() - 1
                }
            };
            let row = &mut rows[i];
            let value = r["p50"]
                .as_f64()
                .or_else(|| r["value"].as_f64())
                .unwrap_or(f64::NAN);
            row.values.push(value);
            if let Some(p95) = r["p95"].as_f64() {
                row.p95.push(p95);
            }
            if let Some(n) = r["n"].as_u64() {
                row.n.push(n);
            }
            if let Some(s) = r["samples"].as_array() {
                row.samples.extend(s.iter().filter_map(Value::as_f64));
            }
            if let Some(m) = r["met"].as_bool() {
                row.met.push(m);
            }
            if let Some(peer) = row.vs.as_deref().and_then(headline) {
                row.ratios.push(value / peer);
            }
        }
    }
    rows
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// A number with the precision its size deserves (thousands separated).
pub(super) fn num(x: f64) -> String {
    if !x.is_finite() {
        return "–".into();
    }
    let a = x.abs();
    if a >= 1000.0 {
        let s = format!("{:.0}", a);
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        format!("{}{out}", if x < 0.0 { "-" } else { "" })
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn with_unit(x: f64, unit: &str) -> String {
    match unit {
        "x" => format!("{}×", num(x)),
        "%" => format!("{}%", num(x)),
        "" => num(x),
        u => format!("{} {u}", num(x)),
    }
}

/// `42 s` below two minutes, else `17 min`.
fn minutes(d: Duration) -> String {
    match d.as_secs() {
        s if s < 120 => format!("{s} s"),
        s => format!("{:.0} min", s as f64 / 60.0),
    }
}

/// Three significant digits (a ratio may be 0.00139 or 719).
fn sig3(x: f64) -> String {
    if !x.is_finite() || x == 0.0 || x.abs() >= 100.0 {
        return num(x);
    }
    let decimals = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.decimals$}")
}

/// `lo–hi` over the runs, or `–` for one run.
fn spread(v: &[f64]) -> String {
    spread_with(v, num)
}

fn spread_with(v: &[f64], f: fn(f64) -> String) -> String {
    if v.len() < 2 {
        return "–".into();
    }
    let (lo, hi) = min_max(v);
    format!("{}–{}", f(lo), f(hi))
}

/// The first sentence of a bench's header (`//! Benchmark: …`).
fn description(bench: &str) -> String {
    let text = std::fs::read_to_string(Path::new(ROOT).join("benches").join(format!("{bench}.rs")))
        .unwrap_or_default();
    let header: Vec<&str> = text
        .lines()
        .map_while(|l| l.strip_prefix("//!"))
        .map(str::trim)
        .collect();
    let joined = header.join(" ");
    let body = joined.strip_prefix("Benchmark:").unwrap_or(&joined).trim();
    let first = match body.find(". ") {
        Some(i) => &body[..=i],
        None => body,
    };
    let mut c = first.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

impl Report<'_> {
    pub(super) fn markdown(&self) -> String {
        let mut m = String::new();
        let o = self.o;
        let _ = writeln!(m, "# Benchmarks\n");
        let _ = writeln!(
            m,
            "<!-- Written by `cargo bench --bench report` (benches/report.rs); run it again rather than edit. -->\n"
        );
        if o.quick {
            let _ = writeln!(
                m,
                "**Quick mode: small sizes, checks only. These figures are not the benches' figures.**\n"
            );
        }
        if !self.failed.is_empty() {
            let _ = writeln!(m, "**Failed runs:** {}\n", self.failed.join("; "));
        }
        let times = match o.runs {
            1 => "once".to_owned(),
            k => format!("{k} times, round-robin (run 1 of every bench, then run 2, …)"),
        };
        let _ = writeln!(
            m,
            "Every bench of `Cargo.toml` run {times}, each measuring the vault and its peer in\n\
             the same process run. For each row: the median over runs of each run's p50 (or of the\n\
             figure, for rates and sizes) and p95, with their spread (min–max over runs); the\n\
             ratio is the row's p50 (or figure) divided by its peer's from the same run, median over\n\
             runs (spread in brackets). The latency distributions: [{PLOT}]({PLOT}).\n"
        );
        let _ = writeln!(
            m,
            "Measured {}: the runs took {} (the build before them {}).\n",
            self.when.strftime("%Y-%m-%d %H:%M UTC"),
            minutes(self.run_time),
            minutes(self.build)
        );
        let _ = writeln!(m, "## Machine\n\n| | |\n|---|---|");
        for (k, v) in &self.machine {
            let _ = writeln!(m, "| {k} | {} |", md_cell(v));
        }

        let all: Vec<(&str, Vec<Row>)> = self
            .benches
            .iter()
            .map(|b| {
                (
                    b.as_str(),
                    self.runs
                        .get(b.as_str())
                        .map(|r| rows(r))
                        .unwrap_or_default(),
                )
            })
            .collect();

        let _ = writeln!(
            m,
            "\n## Goals\n\n| bench | goal | median over runs | met |\n|---|---|---:|---|"
        );
        for (bench, rows) in &all {
            for g in rows.iter().filter(|r| r.kind == "goal") {
                let met = g.met.iter().filter(|m| **m).count();
                let verdict = match (met, g.met.len()) {
                    (m, n) if m == n => format!("met ({m}/{n} runs)"),
                    (0, n) => format!("**not met** (0/{n} runs)"),
                    (m, n) => format!("met in {m}/{n} runs"),
                };
                let _ = writeln!(
                    m,
                    "| {bench} | {} | {} | {verdict} |",
                    md_cell(&g.label),
                    with_unit(median(&g.values), &g.unit)
                );
            }
        }

        for (bench, rows) in &all {
            let runs = self.runs.get(bench).map_or(&[][..], |r| &r[..]);
            let took: Vec<f64> = runs.iter().map(|r| r.took.as_secs_f64()).collect();
            let _ = writeln!(m, "\n## {bench}\n\n{}\n", description(bench));
            let each = match runs.len() {
                1 => format!("One run of {} s", num(took[0])),
                k => format!("{k} runs, {} s each (median)", num(median(&took))),
            };
            let _ = writeln!(m, "{each}; alone: `cargo bench --bench {bench}`.\n");
            let measured: Vec<&Row> = rows.iter().filter(|r| r.kind != "goal").collect();
            if measured.is_empty() {
                let _ = writeln!(m, "No figures: every run failed.");
                continue;
            }
            let _ = writeln!(
                m,
                "| row | p50 / figure | spread | p95 | spread | n | ratio to the peer (same run) |\n|---|---:|---:|---:|---:|---:|---|"
            );
            for r in measured {
                let ratio = if r.peer {
                    "peer".to_owned()
                } else if let Some(vs) = &r.vs {
                    if r.ratios.is_empty() {
                        format!("(no {} row)", md_cell(vs))
                    } else {
                        let s = spread_with(&r.ratios, sig3);
                        format!(
                            "{}× {}{}",
                            sig3(median(&r.ratios)),
                            md_cell(vs),
                            if s == "–" {
                                String::new()
                            } else {
                                format!(" ({s})")
                            }
                        )
                    }
                } else {
                    String::new()
                };
                let (p95, p95_spread) = if r.p95.is_empty() {
                    ("–".to_owned(), "–".to_owned())
                } else {
                    (with_unit(median(&r.p95), &r.unit), spread(&r.p95))
                };
                let n = if r.n.is_empty() {
                    "–".to_owned()
                } else {
                    r.n[0].to_string()
                };
                let _ = writeln!(
                    m,
                    "| {} | {} | {} | {p95} | {p95_spread} | {n} | {ratio} |",
                    md_cell(&r.label),
                    with_unit(median(&r.values), &r.unit),
                    spread(&r.values),
                );
            }
        }
        m
    }

    pub(super) fn svg(&self) -> String {
        let panels: Vec<(String, Vec<Row>)> = self
            .benches
            .iter()
            .filter_map(|b| {
                let rows: Vec<Row> = self
                    .runs
                    .get(b.as_str())
                    .map(|r| rows(r))
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|r| r.kind == "latency" && !r.samples.is_empty())
                    .collect();
                (!rows.is_empty()).then(|| (b.clone(), rows))
            })
            .collect();
        svg::plot(&panels, self.o.runs, self.o.quick)
    }
}
