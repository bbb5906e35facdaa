//! Editing a JSONC config in place (VS Code's `mcp.json`, Gemini CLI's `settings.json`): the
//! file is read as its client reads it (comments, and for VS Code trailing commas), our entry is
//! set through `jsonc-parser`'s concrete syntax tree, so every comment, blank line and trailing
//! comma stays where the person put it, and the result is read back and must mean the old
//! document with only that entry set.
use super::merge::{check_shape, refusal, set_path, Node};
use jsonc_parser::cst::{CstInputValue, CstRootNode};
use jsonc_parser::ParseOptions;
use serde_json::Value;
use std::path::Path;

/// What a client accepts beyond JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Jsonc {
    /// `//` and `/* */` comments (Gemini CLI strips them before parsing).
    Comments,
    /// Comments and trailing commas (VS Code's JSONC).
    CommentsAndTrailingCommas,
}

impl Jsonc {
    /// The parser's options: this dialect and nothing looser (no single quotes, bare keys, hex).
    fn options(self) -> ParseOptions {
        ParseOptions {
            allow_comments: true,
            allow_trailing_commas: self == Jsonc::CommentsAndTrailingCommas,
            allow_loose_object_property_names: false,
            allow_missing_commas: false,
            allow_single_quoted_strings: false,
            allow_hexadecimal_numbers: false,
            allow_unary_plus_numbers: false,
            allow_bare_decimal_point_numbers: false,
            allow_non_finite_numbers: false,
            allow_extended_string_escapes: false,
        }
    }

    fn what(self) -> &'static str {
        match self {
            Jsonc::Comments => "JSON with comments",
            Jsonc::CommentsAndTrailingCommas => "JSON with comments and trailing commas",
        }
    }

    /// The document `text` means, read as the client reads it.
    pub(super) fn parse(self, text: &str) -> Result<Value, String> {
        jsonc_parser::parse_to_serde_value::<Value>(text, &self.options())
            .map_err(|e| e.to_string())
    }
}

/// Sets `path` in `text` (which parses as `dialect`, not as plain JSON) to `value`, keeping every
/// comment and the layout; refuses, naming the file, what it cannot edit.
pub(super) fn set_jsonc(
    text: &str,
    dialect: Jsonc,
    file: &Path,
    path: &[&str],
    value: Node<'_>,
) -> anyhow::Result<String> {
    let refuse = refusal(file);
    let mut old = dialect.parse(text).map_err(|e| {
        refuse(format!(
            "is not valid JSON, nor {} as its client reads it ({e})",
            dialect.what()
        ))
    })?;
    check_shape(&old, path, &refuse)?;
    let root = CstRootNode::parse(text, &dialect.options()).map_err(|e| refuse(e.to_string()))?;
    let mut object = root
        .object_value()
        .ok_or_else(|| refuse("does not hold a JSON object".to_owned()))?;
    let (last, on_the_way) = path.split_last().expect("a path has a member");
    for key in on_the_way {
        object = object
            .object_value_or_create(key)
            .ok_or_else(|| refuse(format!("holds `{key}`, which is not an object")))?;
    }
    match object.get(last) {
        Some(member) => member.set_value(node(&value)),
        None => {
            object.append(last, node(&value));
        }
    }
    let mut out = root.to_string();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    set_path(&mut old, path, serde_json::to_value(&value)?);
    let new = dialect.parse(&out).map_err(|e| {
        anyhow::anyhow!(
            "the merged {} would not parse ({e}); nothing was written (a bug: please report it)",
            file.display()
        )
    })?;
    anyhow::ensure!(new == old, "the merged {} would change more than the entry; nothing was written (a bug: please report it)", file.display());
    Ok(out)
}

/// Our entry as the syntax tree takes it, its members in our order.
fn node(n: &Node<'_>) -> CstInputValue {
    match n {
        Node::New(v) => input(v),
        Node::Raw(raw) => {
            serde_json::from_str::<Value>(raw.get()).map_or(CstInputValue::Null, |v| input(&v))
        }
        Node::Object(members) => {
            CstInputValue::Object(members.iter().map(|(k, v)| (k.clone(), node(v))).collect())
        }
    }
}

/// A JSON value as the syntax tree takes it.
fn input(v: &Value) -> CstInputValue {
    match v {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(a) => CstInputValue::Array(a.iter().map(input).collect()),
        Value::Object(m) => {
            CstInputValue::Object(m.iter().map(|(k, v)| (k.clone(), input(v))).collect())
        }
    }
}
