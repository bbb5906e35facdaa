//! The entry `vault setup` writes (`Server`), and merging it into a config file without
//! disturbing the rest. JSON: every other member keeps its place and its text (values are carried
//! as written, not re-serialized); TOML: every other line, comments included, is kept byte for
//! byte. Each result is parsed back and must mean the old document with only that entry set, else
//! nothing is written.
use anyhow::{bail, Context};
use serde::ser::{SerializeMap, Serializer};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::path::Path;

/// The entry: the program (`agent-vault` by name for a project, this binary's absolute path for
/// the person), `mcp`, and the vault directory it serves (None: the default one, wherever the
/// client runs).
pub(super) struct Server {
    pub(super) name: String,
    pub(super) command: String,
    pub(super) vault_dir: Option<String>,
    /// Gemini CLI's `"trust": true`: no confirmation of its own before a call.
    pub(super) trust: bool,
}

/// A JSON value on its way out: a member kept as it was written, an object whose members we
/// rebuilt (in order), or a value of ours.
pub(super) enum Node<'a> {
    Raw(&'a RawValue),
    Object(Vec<(String, Node<'a>)>),
    New(Value),
}

impl serde::Serialize for Node<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Raw(r) => r.serialize(s),
            Node::New(v) => v.serialize(s),
            Node::Object(members) => {
                let mut map = s.serialize_map(Some(members.len()))?;
                for (k, v) in members {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

/// An object's members in the order written, each value's text untouched.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for Members<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(member) = m.next_entry::<String, &'de RawValue>()? {
                    out.push(member);
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// `raw` (an object; None: absent) with the member at `path` set to `value`: in the place of
/// the first member of that name (the others of that name dropped), else last.
fn with_member<'a>(
    raw: Option<&'a RawValue>,
    path: &[&str],
    value: Node<'a>,
) -> serde_json::Result<Node<'a>> {
    let Some((key, rest)) = path.split_first() else {
        return Ok(value);
    };
    let members = match raw {
        Some(r) => serde_json::from_str::<Members<'a>>(r.get())?.0,
        None => Vec::new(),
    };
    let old = members.iter().find(|(k, _)| k == key).map(|(_, v)| *v);
    let mut new = Some(with_member(old, rest, value)?);
    let mut out: Vec<(String, Node<'a>)> = Vec::with_capacity(members.len() + 1);
    for (k, v) in members {
        if k != *key {
            out.push((k, Node::Raw(v)));
        } else if let Some(n) = new.take() {
            out.push((k, n));
        }
    }
    if let Some(n) = new {
        out.push(((*key).to_owned(), n));
    }
    Ok(Node::Object(out))
}

/// Sets `path` in the JSON document `existing` to `value`, indented as the file is (two spaces
/// for a new one). Every other member keeps its place and its text; the result is checked to
/// mean exactly the old document with that one member set.
pub(super) fn set_json(
    existing: Option<&str>,
    file: &Path,
    path: &[&str],
    value: Node<'_>,
) -> anyhow::Result<String> {
    let text = existing.filter(|t| !t.trim().is_empty()).unwrap_or("{}");
    let refuse = refusal(file);
    let mut old: Value = serde_json::from_str(text).map_err(|e| {
        refuse(format!(
            "is not valid JSON ({e}; comments and trailing commas are not JSON either)"
        ))
    })?;
    check_shape(&old, path, &refuse)?;
    let want = serde_json::to_value(&value)?;
    let root: &RawValue = serde_json::from_str(text)?;
    let node = with_member(Some(root), path, value)?;
    let indent = indentation(text);
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
    serde::Serialize::serialize(
        &node,
        &mut serde_json::Serializer::with_formatter(&mut out, fmt),
    )?;
    out.push(b'\n');
    let out = String::from_utf8(out).context("serde_json wrote UTF-8")?;
    set_path(&mut old, path, want);
    let new: Value = serde_json::from_str(&out)?;
    anyhow::ensure!(new == old, "the merged {} would change more than the entry; nothing was written (a bug: please report it)", file.display());
    Ok(out)
}

/// How a config file that cannot be edited is refused: `what` is wrong with it, and what to do.
pub(super) fn refusal(file: &Path) -> impl Fn(String) -> anyhow::Error + '_ {
    move |what| {
        anyhow::anyhow!(
            "{} {what}; vault setup leaves it as it is. Fix it (or move it away), or add the entry by hand: `vault setup … --print` shows it",
            file.display()
        )
    }
}

/// `doc` with the member at `path` set to `value` (the objects on the way made when missing;
/// `check_shape` holds that each one is an object).
pub(super) fn set_path(doc: &mut Value, path: &[&str], value: Value) {
    let mut slot = doc;
    for key in path {
        let object = slot.as_object_mut().expect("check_shape: an object");
        slot = object.entry(*key).or_insert_with(|| json!({}));
    }
    *slot = value;
}

/// Refuses a document in which a value on the way to `path` is not an object (a missing one is
/// made, so that is fine).
pub(super) fn check_shape(
    old: &Value,
    path: &[&str],
    refuse: &dyn Fn(String) -> anyhow::Error,
) -> anyhow::Result<()> {
    let mut at = Some(old);
    for depth in 0..path.len() {
        match at {
            None => break,
            Some(v) if v.is_object() => at = v.get(path[depth]),
            Some(v) => {
                let whose = match depth {
                    0 => "the file".to_owned(),
                    _ => format!("`{}`", path[..depth].join(".")),
                };
                let kind = match v {
                    Value::Array(_) => "an array",
                    Value::String(_) => "a string",
                    Value::Number(_) => "a number",
                    Value::Bool(_) => "true or false",
                    _ => "null",
                };
                bail!(refuse(format!(
                    "does not hold a JSON object where one belongs: {whose} is {kind}"
                )));
            }
        }
    }
    Ok(())
}

/// The indentation of the first indented line (a file's one level), else two spaces.
fn indentation(text: &str) -> String {
    text.lines()
        .skip(1)
        .map(|l| &l[..l.len() - l.trim_start_matches([' ', '\t']).len()])
        .find(|w| !w.is_empty())
        .unwrap_or("  ")
        .to_owned()
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The key path of a table header line (`[mcp_servers.vault]  # x` → `mcp_servers`, `vault`);
/// None for any other line (an array of tables, a value, a comment, text in a string).
fn header_path(line: &str) -> Option<Vec<String>> {
    let t = line.trim_start();
    if !t.starts_with('[') || t.starts_with("[[") {
        return None;
    }
    let mut table: toml::Table = toml::from_str(t).ok()?;
    let mut path = Vec::new();
    while table.len() == 1 {
        let (k, v) = table.into_iter().next()?;
        path.push(k);
        match v {
            toml::Value::Table(t) => table = t,
            _ => return None,
        }
    }
    (!path.is_empty()).then_some(path)
}

/// Codex's `config.toml` with `[mcp_servers.NAME]` (and any subtable of it) replaced by ours, in
/// its place (else at the end); every other line, comments included, kept byte for byte. The
/// result is checked to mean the old document with that one table set; an entry written in
/// another form (an inline table, dotted keys) is refused rather than guessed at.
pub(super) fn set_toml_server(
    existing: Option<&str>,
    file: &Path,
    s: &Server,
) -> anyhow::Result<String> {
    let text = existing.unwrap_or("");
    let old: toml::Table = toml::from_str(text).map_err(|e| {
        anyhow::anyhow!(
            "{} is not valid TOML ({}); vault setup leaves it as it is. Fix it, or add the entry by hand: `vault setup codex --print` shows it",
            file.display(),
            e.to_string().trim_end()
        )
    })?;
    let nl = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let mut block = vec![
        format!("[mcp_servers.{}]", s.name),
        format!("command = {}", toml_str(&s.command)),
        "args = [\"mcp\"]".to_owned(),
    ];
    if let Some(dir) = &s.vault_dir {
        block.push(format!("env = {{ VAULT_DIR = {} }}", toml_str(dir)));
    }
    let block: String = block.into_iter().map(|l| l + nl).collect();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let ours = |p: &[String]| p.len() >= 2 && p[0] == "mcp_servers" && p[1] == s.name;
    let mut out = String::new();
    let mut placed = false;
    let mut i = 0;
    while i < lines.len() {
        if !header_path(lines[i]).is_some_and(|p| ours(&p)) {
            out.push_str(lines[i]);
            i += 1;
            continue;
        }
        // Our table runs to the next header; the comments and blank lines just above that
        // header belong to it.
        let end = (i + 1..lines.len())
            .find(|&j| header_path(lines[j]).is_some())
            .unwrap_or(lines.len());
        let trailer = |l: &str| l.trim().is_empty() || l.trim().starts_with('#');
        let mut keep = end;
        while keep > i + 1 && trailer(lines[keep - 1]) {
            keep -= 1;
        }
        if !placed {
            out.push_str(&block);
            placed = true;
        }
        for l in &lines[keep..end] {
            // No second blank line where two trailers meet.
            if !(l.trim().is_empty() && (out.ends_with("\n\n") || out.ends_with("\n\r\n"))) {
                out.push_str(l);
            }
        }
        i = end;
    }
    if !placed {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push_str(nl);
        }
        if !out.trim().is_empty() && !out.ends_with(&format!("{nl}{nl}")) {
            out.push_str(nl);
        }
        out.push_str(&block);
    }
    let unusual = || {
        anyhow::anyhow!(
            "{} defines mcp_servers.{} in a form vault setup does not edit (an inline table or dotted keys); remove that entry by hand and run again, or replace it with what `vault setup codex --print` shows",
            file.display(),
            s.name
        )
    };
    let mut new: toml::Table = toml::from_str(&out).map_err(|_| unusual())?;
    let want: toml::Table = toml::from_str(&block).expect("our block is TOML");
    let strip = |t: &mut toml::Table| {
        let servers = t.get_mut("mcp_servers").and_then(toml::Value::as_table_mut);
        let entry = servers.and_then(|m| m.remove(&s.name));
        if t.get("mcp_servers")
            .and_then(toml::Value::as_table)
            .is_some_and(toml::Table::is_empty)
        {
            t.remove("mcp_servers");
        }
        entry
    };
    let mut old = old;
    let _ = strip(&mut old);
    if strip(&mut new).as_ref() != want["mcp_servers"].get(&s.name) || new != old {
        return Err(unusual());
    }
    Ok(out)
}
