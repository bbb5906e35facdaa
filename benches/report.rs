//! The benchmark report: runs every other `[[bench]]` of `Cargo.toml` K times, each measuring the
//! vault and its peer in the same process run as it always does, and writes `BENCHMARKS.md` (the
//! machine; per row the median over runs of each run's p50 and p95, their spread min–max over
//! runs, and the ratio to the peer of the same run; every goal, with the runs that met it) and
//! `docs/bench-latency.svg` (the latency distribution of every bench that records samples: CDFs
//! on a log time axis, the runs pooled).
//!
//! Run: `cargo bench --bench report` (3 runs, round-robin: run 1 of every bench, then run 2, …,
//! so a disturbance lands in one run of each rather than in every run of one; tens of minutes).
//! Options after `--`: `--runs K`; `--only a,b` (some benches; the report then goes to a temp
//! dir); `--out DIR` (write there instead of the repository). `-- --quick`: every bench once in
//! quick mode and the report written into a temp dir, never the committed files: what CI runs
//! (`.ci/run`), failing if a bench fails or records nothing. The committed files are written only
//! by a full run of every bench in which none failed; otherwise the report goes to a temp dir and
//! the command fails.
//!
//! How: one `cargo bench --benches --no-run --message-format=json` (the cargo and target dir of
//! this run) builds every bench and names its executable: in the bench profile (the shipped
//! release build) for figures, in the dev profile for `--quick`, whose checks need no speed and
//! whose build reuses `cargo test`'s (one fat-LTO link per bench was five minutes of CI); each run executes it as `cargo
//! bench` would (`<exe> --bench [--quick]`, from the package root) with `BENCH_JSON` naming a
//! fresh file, to which the bench appends one JSON record per measured row and goal
//! (`benches/common`: `emit_samples`, `emit_figure`, `emit_goal`).
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const REPORT: &str = "BENCHMARKS.md";
const PLOT: &str = "docs/bench-latency.svg";

struct Options {
    quick: bool,
    runs: usize,
    only: Option<Vec<String>>,
    out: Option<PathBuf>,
}

fn options() -> Options {
    let mut o = Options {
        quick: false,
        runs: 3,
        only: None,
        out: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .unwrap_or_else(|| usage(&format!("{name} needs a value")))
        };
        match a.as_str() {
            "--bench" => {}
            "--quick" => o.quick = true,
            "--runs" => {
                o.runs = value("--runs")
                    .parse()
                    .ok()
                    .filter(|k| *k >= 1)
                    .unwrap_or_else(|| usage("--runs takes a whole number >= 1"))
            }
            "--only" => o.only = Some(value("--only").split(',').map(str::to_owned).collect()),
            "--out" => o.out = Some(PathBuf::from(value("--out"))),
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    if o.quick {
        o.runs = 1;
    }
    o
}

fn usage(why: &str) -> ! {
    eprintln!("report: {why}");
    eprintln!(
        "usage: cargo bench --bench report [-- [--quick] [--runs K] [--only a,b] [--out DIR]]"
    );
    std::process::exit(2);
}

/// The `[[bench]]` names of Cargo.toml, in its order, without this one.
fn declared_benches() -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(ROOT).join("Cargo.toml")).expect("Cargo.toml");
    let manifest: toml::Table = text.parse().expect("Cargo.toml parses");
    manifest
        .get("bench")
        .and_then(|b| b.as_array())
        .into_iter()
        .flatten()
        .filter_map(|b| b.get("name")?.as_str().map(str::to_owned))
        .filter(|n| n != "report")
        .collect()
}

/// Builds every bench (the same cargo and target dir; the dev profile when `quick`) and returns
/// each one's executable.
fn build_benches(quick: bool) -> BTreeMap<String, PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let profile: &[&str] = if quick { &["--profile", "dev"] } else { &[] };
    println!(
        "report: building every bench (cargo bench --benches --no-run {})",
        profile.join(" ")
    );
    let mut build = Command::new(&cargo);
    // What cargo set for this process only (the package's CARGO_PKG_*, …): build scripts track
    // some of them (ring: CARGO_PKG_VERSION_MAJOR), so the build would differ from the
    // caller's and rebuild half the tree.
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("CARGO_PKG_")
            || [
                "CARGO_MANIFEST_DIR",
                "CARGO_MANIFEST_PATH",
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "CARGO_RUSTC_CURRENT_DIR",
                "OUT_DIR",
            ]
            .contains(&k.as_ref())
        {
            build.env_remove(k.as_ref());
        }
    }
    let out = build
        .args([
            "bench",
            "--locked",
            "--benches",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .args(profile)
        .current_dir(ROOT)
        .stderr(Stdio::inherit())
        .output()
        .expect("run cargo");
    assert!(out.status.success(), "cargo bench --no-run failed");
    let mut exes = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let is_bench = v["target"]["kind"]
            .as_array()
            .is_some_and(|k| k.iter().any(|k| k == "bench"));
        if let (true, Some(name), Some(exe)) = (
            is_bench,
            v["target"]["name"].as_str(),
            v["executable"].as_str(),
        ) {
            exes.insert(name.to_owned(), PathBuf::from(exe));
        }
    }
    exes
}

/// One bench executed once.
struct Run {
    ok: bool,
    status: String,
    took: Duration,
    records: Vec<Value>,
}

fn run_bench(name: &str, exe: &Path, quick: bool, records: &Path) -> Run {
    let _ = std::fs::remove_file(records);
    let mut cmd = Command::new(exe);
    cmd.arg("--bench")
        .current_dir(ROOT)
        .env("BENCH_JSON", records);
    if quick {
        cmd.arg("--quick");
    }
    let t = Instant::now();
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("run {}: {e}", exe.display()));
    let took = t.elapsed();
    let records: Vec<Value> = std::fs::read_to_string(records)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a bench record is JSON"))
        .collect();
    let (ok, status) = if !status.success() {
        (false, format!("failed ({status})"))
    } else if records.is_empty() {
        (
            false,
            format!("recorded nothing: {name} must report its rows through benches/common (emit_samples, emit_figure, emit_goal)"),
        )
    } else {
        (true, "passed".into())
    };
    Run {
        ok,
        status,
        took,
        records,
    }
}

fn main() {
    let o = options();
    let started = Instant::now();
    let when = jiff::Timestamp::now();
    let mut machine = machine();
    let declared = declared_benches();
    if declared.is_empty() {
        usage("no [[bench]] besides this one in Cargo.toml");
    }
    let benches: Vec<String> = match &o.only {
        Some(only) => {
            for b in only {
                if !declared.contains(b) {
                    usage(&format!(
                        "no bench {b:?} in Cargo.toml (benches: {})",
                        declared.join(", ")
                    ));
                }
            }
            declared
                .iter()
                .filter(|b| only.contains(b))
                .cloned()
                .collect()
        }
        None => declared.clone(),
    };
    let exes = build_benches(o.quick);
    let build = started.elapsed();
    let work =
        std::env::temp_dir().join(format!("agent-vault-bench-report-{}", std::process::id()));
    std::fs::create_dir_all(work.join("records")).expect("temp dir");

    // runs[bench][run]
    let mut runs: BTreeMap<&str, Vec<Run>> = BTreeMap::new();
    for k in 1..=o.runs {
        for name in &benches {
            let exe = exes
                .get(name)
                .unwrap_or_else(|| panic!("cargo built no executable for bench {name}"));
            println!(
                "\n=== bench {name}{} (run {k}/{})",
                if o.quick { " --quick" } else { "" },
                o.runs
            );
            let file = work.join("records").join(format!("{name}-{k}.jsonl"));
            let r = run_bench(name, exe, o.quick, &file);
            println!(
                "bench {name}: {}{} in {:.0}s",
                if o.quick { "quick mode " } else { "" },
                r.status,
                r.took.as_secs_f64()
            );
            runs.entry(name).or_default().push(r);
        }
    }
    let total = started.elapsed();
    let run_time = total - build;

    let failed: Vec<String> = runs
        .iter()
        .flat_map(|(b, rs)| {
            rs.iter()
                .enumerate()
                .filter(|(_, r)| !r.ok)
                .map(move |(i, r)| format!("{b} (run {}): {}", i + 1, r.status))
        })
        .collect();
    let committed = !o.quick && o.only.is_none() && failed.is_empty();
    let out = match (&o.out, committed) {
        (Some(dir), _) => dir.clone(),
        (None, true) => PathBuf::from(ROOT),
        (None, false) => work.clone(),
    };
    if let Some((_, load)) = machine.last_mut() {
        *load = format!("{load} at the start, {} at the end (1 min)", load_average());
    }
    let report = Report {
        o: &o,
        benches: &benches,
        runs: &runs,
        when,
        build,
        run_time,
        machine,
        failed: &failed,
    };
    std::fs::create_dir_all(out.join("docs")).expect("create the docs dir");
    std::fs::write(out.join(REPORT), report.markdown()).expect("write the report");
    std::fs::write(out.join(PLOT), report.svg()).expect("write the plot");
    println!(
        "\nreport: {} benches x {} run(s) in {:.0}s; wrote {} and {} (records in {})",
        benches.len(),
        o.runs,
        total.as_secs_f64(),
        out.join(REPORT).display(),
        out.join(PLOT).display(),
        work.join("records").display()
    );
    if !failed.is_empty() {
        for f in &failed {
            eprintln!("report: bench {f}");
        }
        for (b, _) in runs.iter().filter(|(_, rs)| rs.iter().any(|r| !r.ok)) {
            eprintln!(
                "report: rerun it alone: cargo bench --bench {b}{}",
                if o.quick { " -- --quick" } else { "" }
            );
        }
        std::process::exit(1);
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

fn command_line(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .current_dir(ROOT)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// What the figures are measured on, as (what, value) lines, read before the runs (the load
/// average last: the end's is added after them).
fn machine() -> Vec<(String, String)> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")?
                .split_once(':')
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "?".into());
    let online = cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    let available = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let kib: f64 = m
                .lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))?
                .split_whitespace()
                .next()?
                .parse()
                .ok()?;
            Some(format!("{:.1} GiB", kib / 1024.0 / 1024.0))
        })
        .unwrap_or_else(|| "?".into());
    let read = |p: &str| std::fs::read_to_string(p).map_or("?".into(), |s| s.trim().to_owned());
    let kernel = format!(
        "{} {} ({})",
        read("/proc/sys/kernel/ostype"),
        read("/proc/sys/kernel/osrelease"),
        std::env::consts::ARCH
    );
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc = command_line(&rustc, &["-V"]).unwrap_or_else(|| "?".into());
    let commit =
        command_line("git", &["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "?".into());
    let dirty = command_line("git", &["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|s| !s.is_empty());
    vec![
        ("CPU".into(), cpu),
        (
            "cores".into(),
            format!("{online} online, {available} available to the run"),
        ),
        ("memory".into(), mem),
        ("kernel".into(), kernel),
        ("rustc".into(), rustc),
        (
            "build".into(),
            "the bench profile, which is the release one (fat LTO, 1 codegen unit)".into(),
        ),
        (
            "commit".into(),
            format!(
                "`{commit}`{}",
                if dirty {
                    " with uncommitted changes"
                } else {
                    ""
                }
            ),
        ),
        ("load average".into(), load_average()),
    ]
}

struct Report<'a> {
    o: &'a Options,
    benches: &'a [String],
    runs: &'a BTreeMap<&'a str, Vec<Run>>,
    when: jiff::Timestamp,
    build: Duration,
    run_time: Duration,
    machine: Vec<(String, String)>,
    failed: &'a [String],
}

/// One row of a bench, over its runs.
struct Row {
    label: String,
    kind: String,
    unit: String,
    peer: bool,
    vs: Option<String>,
    /// Per run: the headline (p50, or the figure), p95 (latencies), n, samples.
    values: Vec<f64>,
    p95: Vec<f64>,
    n: Vec<u64>,
    samples: Vec<f64>,
    /// Per run, for a goal: met.
    met: Vec<bool>,
    /// Per run: headline / the peer's headline of the same run.
    ratios: Vec<f64>,
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
fn num(x: f64) -> String {
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
    fn markdown(&self) -> String {
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

    fn svg(&self) -> String {
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

/// The latency plot, written by hand: one panel per bench, a CDF per row on a log time axis.
mod svg {
    use super::Row;
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
                super::num(quantile(&r.samples, 0.5)),
                super::num(quantile(&r.samples, 0.95)),
                r.samples.len()
            );
        }
    }
}
