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

#[path = "report/markdown.rs"]
mod markdown;
use markdown::Report;
#[path = "report/svg.rs"]
mod svg;
