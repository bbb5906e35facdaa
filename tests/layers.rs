//! The layering of the crate, checked on its source: which top-level modules each module may
//! import (`crate::…`, outside test code), with no cycle between them. A new upward edge fails
//! here, naming the file; an allowed edge that is no longer used is reported too, so the table
//! stays the truth. `cargo test --test layers -- --nocapture` prints the table and the cycles.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module and the modules it may import. `wire` is the leaf every process shares;
/// `cli` is the top.
#[rustfmt::skip]
const ALLOWED: &[(&str, &[&str])] = &[
    ("wire", &[]),
    ("canonical", &[]),
    ("time", &["wire"]),
    ("term", &[]),
    ("import", &[]),
    ("sys", &["wire"]),
    ("paths", &["sys"]),
    ("config", &["paths"]),
    ("scan", &[]),
    ("keys", &["canonical", "wire"]),
    ("store", &["keys", "time"]),
    ("audit", &["canonical", "paths", "store", "time", "wire"]),
    (
        "credentials",
        &["audit", "keys", "store", "time", "wire"],
    ),
    ("policy", &["canonical", "credentials", "term", "wire"]),
    (
        "approvals",
        &[
            "audit",
            "canonical",
            "credentials",
            "keys",
            "policy",
            "store",
            "time",
            "wire",
        ],
    ),
    (
        "exec",
        &["approvals", "config", "credentials", "policy", "wire"],
    ),
    (
        "services",
        &[
            "approvals",
            "audit",
            "canonical",
            "credentials",
            "exec",
            "paths",
            "policy",
            "store",
            "wire",
        ],
    ),
    (
        "agent",
        &[
            "approvals",
            "audit",
            "config",
            "credentials",
            "exec",
            "keys",
            "paths",
            "policy",
            "services",
            "store",
            "sys",
            "time",
            "wire",
        ],
    ),
    ("mcp", &["agent", "config", "paths", "wire"]),
    ("contain", &["agent", "paths", "sys"]),
    (
        "vault",
        &[
            "approvals",
            "audit",
            "credentials",
            "keys",
            "paths",
            "store",
            "sys",
            "time",
            "wire",
        ],
    ),
    (
        "demo",
        &[
            "agent",
            "approvals",
            "audit",
            "credentials",
            "keys",
            "paths",
            "vault",
            "wire",
        ],
    ),
    (
        "cli",
        &[
            "agent",
            "approvals",
            "audit",
            "config",
            "contain",
            "credentials",
            "demo",
            "import",
            "keys",
            "mcp",
            "paths",
            "policy",
            "scan",
            "services",
            "store",
            "sys",
            "term",
            "time",
            "vault",
            "wire",
        ],
    ),
];

/// The top-level module a source file belongs to (`src/agent/db.rs` → `agent`).
fn top_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_owned())
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file that ships: test files are skipped, and a file is cut at its first
/// `#[cfg(test)]` (the tests module closes every file that has one).
fn shipped(file: &Path) -> Option<String> {
    let name = file.file_name()?.to_str()?;
    if name.contains("tests") || file.components().any(|c| c.as_os_str() == "tests") {
        return None;
    }
    let text = std::fs::read_to_string(file).ok()?;
    Some(match text.find("#[cfg(test)]") {
        Some(i) => text[..i].to_owned(),
        None => text,
    })
}

/// Every `crate::NAME` in the code (a path or a `use`), NAME a top-level module.
fn imports(code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + 7..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        if modules.contains(&name) {
            out.insert(name);
        }
    }
    out
}

/// Cycles among `edges`: the strongly connected groups of more than one module.
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_owned()];
        while let Some(m) = todo.pop() {
            for n in edges.get(&m).into_iter().flatten() {
                if seen.insert(n.clone()) {
                    todo.push(n.clone());
                }
            }
        }
        seen
    };
    let mut groups: Vec<BTreeSet<String>> = Vec::new();
    for m in edges.keys() {
        let from_m = reach(m);
        let group: BTreeSet<String> = from_m
            .iter()
            .filter(|n| *n != m && reach(n).contains(m))
            .cloned()
            .chain(std::iter::once(m.clone()))
            .collect();
        if group.len() > 1 && !groups.contains(&group) {
            groups.push(group);
        }
    }
    groups
}

#[test]
fn modules_import_only_downward_and_form_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| top_of(&src, f)).collect();
    let allowed: BTreeMap<&str, BTreeSet<&str>> = ALLOWED
        .iter()
        .map(|(m, deps)| (*m, deps.iter().copied().collect()))
        .collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    for f in &files {
        let (Some(top), Some(code)) = (top_of(&src, f), shipped(f)) else {
            continue;
        };
        for dep in imports(&code, &modules) {
            if dep == top {
                continue;
            }
            match allowed.get(top.as_str()) {
                None => problems.push(format!("module {top} is not in the layer table")),
                Some(ok) if !ok.contains(dep.as_str()) => problems.push(format!(
                    "{} imports crate::{dep}: {top} may import only {ok:?}",
                    f.strip_prefix(&src).unwrap().display()
                )),
                Some(_) => {}
            }
            edges.entry(top.clone()).or_default().insert(dep);
        }
    }
    for (m, deps) in &allowed {
        for d in deps {
            if !edges.get(*m).is_some_and(|e| e.contains(*d)) {
                problems.push(format!(
                    "{m} may import {d} but no longer does: drop it from ALLOWED"
                ));
            }
        }
    }
    let found = cycles(&edges);
    for (m, deps) in ALLOWED {
        println!("{m:<12} -> {}", deps.join(", "));
    }
    println!("import cycles between top-level modules: {}", found.len());
    for c in &found {
        problems.push(format!("import cycle: {c:?}"));
    }
    problems.sort();
    problems.dedup();
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}
