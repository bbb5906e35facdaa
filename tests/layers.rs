//! The layering of the crate, checked on its source, at three scales.
//!
//! Top-level modules: which top-level modules each module may import (`crate::…`, outside test
//! code), with no cycle between them. A new upward edge fails here, naming the file; an allowed
//! edge that is no longer used is reported too, so the table stays the truth.
//!
//! Inside a folder: the files and subfolders of one folder (`src/agent/client.rs`,
//! `src/agent/connection/`) form a graph, with an edge A → B when code in A names its sibling B
//! (`super::b::…`, `crate::agent::b::…`, `self::b::…`, a `use` tree that reaches one, or an item
//! that the folder's `mod.rs` re-exports from B). The folder's `mod.rs` is not a node: it is the
//! parent of its files (it declares them, and they may use its own items), so only what it
//! re-exports from one file on behalf of another counts. That graph has no circle; a circle is
//! listed as `a → b → a` with file paths and the path each file names.
//!
//! Upward: only the crate root enters `cli`, and only by its entry (`cli::main`,
//! `cli::init_tracing`); no other module names `crate::cli::…`. The root (`lib.rs`) runs the CLI,
//! so it is the top layer: an item defined in it and named from a module is an upward import.
//!
//! Paths are read from the code with comments and string literals blanked out, up to a file's
//! first `#[cfg(test)]`; test files are skipped. `cargo test --test layers -- --nocapture`
//! prints the table and the cycles.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module and the modules it may import. `wire` is the leaf every process shares;
/// `cli` is the top.
#[rustfmt::skip]
const ALLOWED: &[(&str, &[&str])] = &[
    ("wire", &[]),
    ("canonical", &[]),
    ("mutation", &[]),
    ("time", &["wire"]),
    ("term", &["mutation"]),
    ("import", &[]),
    ("sys", &["mutation", "wire"]),
    ("paths", &["sys"]),
    ("config", &["paths"]),
    ("scan", &[]),
    ("openbao", &[]),
    ("fido", &[]),
    ("keys", &["canonical", "mutation", "wire"]),
    ("store", &["keys", "time"]),
    ("audit", &["canonical", "fido", "mutation", "paths", "store", "sys", "time", "wire"]),
    (
        "credentials",
        &["audit", "keys", "store", "time", "wire"],
    ),
    ("policy", &["canonical", "credentials", "mutation", "term", "wire"]),
    (
        "approvals",
        &[
            "audit",
            "canonical",
            "credentials",
            "fido",
            "keys",
            "mutation",
            "policy",
            "store",
            "time",
            "wire",
        ],
    ),
    (
        "exec",
        &["approvals", "config", "credentials", "mutation", "policy", "wire"],
    ),
    (
        "services",
        &[
            "approvals",
            "audit",
            "canonical",
            "config",
            "credentials",
            "exec",
            "keys",
            "openbao",
            "paths",
            "policy",
            "store",
            "time",
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
            "fido",
            "keys",
            "mutation",
            "paths",
            "policy",
            "services",
            "store",
            "sys",
            "time",
            "wire",
        ],
    ),
    ("mcp", &["agent", "config", "mutation", "paths", "wire"]),
    ("contain", &["agent", "exec", "mutation", "paths", "sys"]),
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
            "fido",
            "import",
            "keys",
            "openbao",
            "mcp",
            "mutation",
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

/// The text with comments, string literals and char literals blanked, so a path in a doc comment
/// or an error message is not read as an import.
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let ident = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric() || *c == '_');
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let (c, next) = (b[i], b.get(i + 1).copied());
        let prev_free =
            i == 0 || !ident(b.get(i - 1)) || (b[i - 1] == 'b' && (i < 2 || !ident(b.get(i - 2))));
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && matches!(next, Some('"' | '#')) && prev_free {
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            while j < b.len() && !(b[j] == '"' && (1..=hashes).all(|h| b.get(j + h) == Some(&'#')))
            {
                j += 1;
            }
            i = j + 1 + hashes;
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && next == Some('\\') {
            i += 2;
            while i < b.len() && b[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else if c == '\'' && b.get(i + 2) == Some(&'\'') {
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Identifiers, `::` and single punctuation characters.
fn tokens(code: &str) -> Vec<String> {
    let b: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push(b[start..i].iter().collect());
        } else if c == ':' && b.get(i + 1) == Some(&':') {
            out.push("::".to_owned());
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
            i += 1;
        }
    }
    out
}

/// The paths of one `use` tree from `t[*i]`, each with the name it brings in.
fn use_tree(
    t: &[String],
    i: &mut usize,
    mut path: Vec<String>,
    out: &mut Vec<(Vec<String>, String)>,
) {
    while let Some(tok) = t.get(*i) {
        match tok.as_str() {
            "{" => {
                *i += 1;
                while t.get(*i).is_some_and(|x| x != "}") {
                    use_tree(t, i, path.clone(), out);
                    if t.get(*i).is_some_and(|x| x == ",") {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            "*" => {
                *i += 1;
                out.push((path, "*".to_owned()));
                return;
            }
            "::" => *i += 1,
            name => {
                path.push(name.to_owned());
                *i += 1;
                if t.get(*i).is_some_and(|x| x == "::") {
                    continue;
                }
                let mut brought = name.to_owned();
                if t.get(*i).is_some_and(|x| x == "as") {
                    brought = t.get(*i + 1).cloned().unwrap_or_default();
                    *i += 2;
                }
                if path.last().is_some_and(|l| l == "self") {
                    path.pop();
                    brought = path.last().cloned().unwrap_or_default();
                }
                out.push((path, brought));
                return;
            }
        }
    }
}

/// One source file: its module path (`src/agent/connection/mod.rs` → `agent::connection`), the
/// absolute module paths its code names (with the path as written) and what its `use`s bring in.
struct Source {
    file: PathBuf,
    module: Vec<String>,
    names: Vec<(Vec<String>, String)>,
    brought: BTreeMap<String, Vec<String>>,
}

fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut m: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = m.pop().unwrap();
    if !matches!(last.as_str(), "mod.rs" | "lib.rs" | "main.rs") {
        m.push(last.trim_end_matches(".rs").to_owned());
    }
    m
}

/// Whether `module::name` is a module with a file or folder of its own.
fn is_child(src: &Path, module: &[String], name: &str) -> bool {
    let dir: PathBuf = module.iter().fold(src.to_path_buf(), |d, m| d.join(m));
    dir.join(format!("{name}.rs")).is_file() || dir.join(name).is_dir()
}

/// `path` as written in `module`, made absolute (without `crate`); `None` for an outside crate.
fn absolute(src: &Path, module: &[String], path: &[String]) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut abs: Vec<String> = match first.as_str() {
        "crate" => path[1..].to_vec(),
        "self" => module.iter().chain(&path[1..]).cloned().collect(),
        "super" => {
            let ups = path.iter().take_while(|s| *s == "super").count();
            let base = module.get(..module.len().checked_sub(ups)?)?;
            base.iter().chain(&path[ups..]).cloned().collect()
        }
        name if is_child(src, module, name) => module.iter().chain(path).cloned().collect(),
        _ => return None,
    };
    if abs.last().is_some_and(|l| l == "self") {
        abs.pop();
    }
    Some(abs)
}

fn read_source(src: &Path, file: &Path, code: &str) -> Source {
    let module = module_of(src, file);
    let t = tokens(&code_only(code));
    let mut names = Vec::new();
    let mut brought = BTreeMap::new();
    let mut i = 0;
    while i < t.len() {
        let starts = i == 0 || (t[i - 1] != "::" && t[i - 1] != "'");
        if t[i] == "use" && starts {
            i += 1;
            let mut found = Vec::new();
            use_tree(&t, &mut i, Vec::new(), &mut found);
            for (path, name) in found {
                if let Some(abs) = absolute(src, &module, &path) {
                    brought.insert(name, abs.clone());
                    names.push((abs, path.join("::")));
                }
            }
            continue;
        }
        let is_ident = t[i].starts_with(|c: char| c.is_alphabetic() || c == '_');
        if !(starts && is_ident && t.get(i + 1).is_some_and(|x| x == "::")) {
            i += 1;
            continue;
        }
        let mut path = vec![t[i].clone()];
        i += 1;
        while t.get(i).is_some_and(|x| x == "::")
            && t.get(i + 1)
                .is_some_and(|x| x.starts_with(|c: char| c.is_alphabetic() || c == '_'))
        {
            path.push(t[i + 1].clone());
            i += 2;
        }
        if let Some(abs) = absolute(src, &module, &path) {
            names.push((abs, path.join("::")));
        }
    }
    Source {
        file: file.to_path_buf(),
        module,
        names,
        brought,
    }
}

fn sources() -> (PathBuf, Vec<Source>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let out = files
        .iter()
        .filter_map(|f| Some(read_source(&src, f, &shipped(f)?)))
        .collect();
    (src, out)
}

/// How a folder's child shows in a message: `src/agent/client.rs` or `src/agent/connection/`.
fn shown(src: &Path, folder: &[String], child: &str) -> String {
    let dir: PathBuf = folder.iter().fold(src.to_path_buf(), |d, m| d.join(m));
    let base = Path::new("src").join(dir.strip_prefix(src).unwrap());
    if dir.join(format!("{child}.rs")).is_file() {
        base.join(format!("{child}.rs")).display().to_string()
    } else {
        format!("{}/", base.join(child).display())
    }
}

/// The shortest circle from `start` back to itself inside `group`.
fn circle(
    edges: &BTreeMap<String, BTreeSet<String>>,
    group: &BTreeSet<String>,
    start: &str,
) -> Vec<String> {
    let mut back: BTreeMap<String, String> = BTreeMap::new();
    let mut todo = std::collections::VecDeque::from([start.to_owned()]);
    while let Some(m) = todo.pop_front() {
        for n in edges
            .get(&m)
            .into_iter()
            .flatten()
            .filter(|n| group.contains(*n))
        {
            if n == start {
                let mut path = vec![start.to_owned(), m.clone()];
                while let Some(p) = back.get(path.last().unwrap()) {
                    path.push(p.clone());
                }
                path.reverse();
                path.insert(0, start.to_owned());
                path.dedup();
                return path;
            }
            if !back.contains_key(n) && n != start {
                back.insert(n.clone(), m.clone());
                todo.push_back(n.clone());
            }
        }
    }
    vec![start.to_owned()]
}

#[test]
fn no_circle_between_the_files_of_a_folder() {
    let (src, all) = sources();
    // The items each folder's mod.rs brings in with `use`, by name → the child it comes from.
    let hubs: BTreeMap<Vec<String>, &BTreeMap<String, Vec<String>>> = all
        .iter()
        .filter(|s| s.file.ends_with("mod.rs"))
        .map(|s| (s.module.clone(), &s.brought))
        .collect();
    // folder → (from → to) → the path the code wrote
    type Edges = BTreeMap<(String, String), (PathBuf, String)>;
    let mut folders: BTreeMap<Vec<String>, Edges> = BTreeMap::new();
    for s in &all {
        for k in 1..s.module.len() {
            let (folder, node) = (&s.module[..k], &s.module[k]);
            for (abs, written) in &s.names {
                if abs.len() <= k || abs[..k] != *folder {
                    continue;
                }
                let to = if is_child(&src, folder, &abs[k]) {
                    abs[k].clone()
                } else {
                    let Some(from_hub) = hubs.get(folder).and_then(|h| h.get(&abs[k])) else {
                        continue;
                    };
                    match from_hub.get(k) {
                        Some(c) if from_hub[..k] == *folder && is_child(&src, folder, c) => {
                            c.clone()
                        }
                        _ => continue,
                    }
                };
                if to != *node {
                    folders
                        .entry(folder.to_vec())
                        .or_default()
                        .entry((node.clone(), to))
                        .or_insert_with(|| (s.file.clone(), written.clone()));
                }
            }
        }
    }
    let mut problems = Vec::new();
    for (folder, edges) in &folders {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges.keys() {
            graph.entry(a.clone()).or_default().insert(b.clone());
        }
        for group in cycles(&graph) {
            let start = group.iter().next().unwrap();
            let path = circle(&graph, &group, start);
            let files: Vec<String> = path.iter().map(|n| shown(&src, folder, n)).collect();
            let why: Vec<String> = path
                .windows(2)
                .map(|w| {
                    let (file, written) = &edges[&(w[0].clone(), w[1].clone())];
                    format!(
                        "src/{} names {written}",
                        file.strip_prefix(&src).unwrap().display()
                    )
                })
                .collect();
            let rest: Vec<&String> = group.iter().filter(|n| !path.contains(n)).collect();
            let more = if rest.is_empty() {
                String::new()
            } else {
                format!("; the circle also takes in {rest:?}")
            };
            problems.push(format!(
                "circle in src/{}/: {} ({}){more}. Move the shared piece into a lower file of the folder, or merge the two",
                folder.join("/"),
                files.join(" → "),
                why.join("; ")
            ));
        }
    }
    println!("folder graphs checked: {}", folders.len());
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// What the crate root may name in `cli`: its entry.
const ROOT_ENTERS_CLI_BY: &[&str] = &["main", "init_tracing"];

#[test]
fn nothing_imports_up_into_cli_or_the_crate_root() {
    let (src, all) = sources();
    let mut problems = Vec::new();
    let mut root_items: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in &all {
        let file = Path::new("src")
            .join(s.file.strip_prefix(&src).unwrap())
            .display()
            .to_string();
        for (abs, written) in &s.names {
            let Some(first) = abs.first() else { continue };
            match s.module.first() {
                None if first == "cli" => {
                    let item = abs.get(1).map_or("", String::as_str);
                    if !ROOT_ENTERS_CLI_BY.contains(&item) {
                        problems.push(format!(
                            "{file} names {written}: the crate root enters cli only by {ROOT_ENTERS_CLI_BY:?}; \
                             a type both use belongs in a module below cli"
                        ));
                    }
                }
                Some(top) if first == "cli" && top != "cli" => problems.push(format!(
                    "{file} names {written}: cli is the top layer; move what {top} needs out of cli, down to {top} or below"
                )),
                Some(_) if !is_child(&src, &[], first) => {
                    root_items.entry(first.clone()).or_default().insert(file.clone());
                }
                _ => {}
            }
        }
    }
    for (item, files) in &root_items {
        problems.push(format!(
            "crate::{item} is an item of lib.rs, named from {} files ({}): lib.rs runs cli, so it is the top \
             layer and naming it from a module imports upward. Define {item} in the module that owns it",
            files.len(),
            files.iter().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    problems.sort();
    problems.dedup();
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}
