//! `bitwarden:FILE#ITEM[/FIELD]`: Bitwarden's unencrypted JSON export
//! (`{"items":[{"id","name","login":{"password"},"fields":[{"name","value"}]}]}`). Passwords and
//! field values are kept as raw JSON until one is chosen: only that one is decoded, into
//! zeroizing memory; every other secret of the export stays in the file's zeroizing buffer.
use super::{exact, read_file, ImportError};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::path::Path;
use zeroize::Zeroizing;

#[derive(Deserialize)]
struct Export<'a> {
    #[serde(default)]
    encrypted: bool,
    #[serde(borrow)]
    items: Option<Vec<Item<'a>>>,
}

#[derive(Deserialize)]
struct Item<'a> {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(borrow, default)]
    login: Option<Login<'a>>,
    #[serde(borrow, default)]
    fields: Option<Vec<Field<'a>>>,
}

#[derive(Deserialize)]
struct Login<'a> {
    #[serde(borrow, default)]
    password: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Field<'a> {
    #[serde(default)]
    name: Option<String>,
    #[serde(borrow, default)]
    value: Option<&'a RawValue>,
}

/// The login password of the item named (or with the id) `spec`, or with `ITEM/FIELD` a custom
/// field's value. An item named `spec` whole wins over a split at its last `/`.
pub(super) fn read(
    label: &str,
    file: &Path,
    spec: &str,
) -> Result<Zeroizing<Vec<u8>>, ImportError> {
    let text = read_file(label, file)?;
    let bad = |reason: String| ImportError::Export {
        label: label.into(),
        reason,
    };
    let export: Export = serde_json::from_slice(&text).map_err(|e| {
        // serde_json's message names a line and column, never the text there.
        bad(format!(
            "{} is not a Bitwarden JSON export ({e}); export the vault as JSON (not CSV)",
            file.display()
        ))
    })?;
    if export.encrypted {
        return Err(bad(format!(
            "{} is an encrypted export; export again choosing the unencrypted JSON format, and delete the file once imported",
            file.display()
        )));
    }
    let items = export.items.ok_or_else(|| {
        bad(format!(
            "{} has no \"items\" list; export the vault (not one folder or organization) as JSON",
            file.display()
        ))
    })?;
    let named = |want: &str| -> Vec<&Item> {
        let by_name: Vec<&Item> = items
            .iter()
            .filter(|i| i.name.as_deref() == Some(want))
            .collect();
        if by_name.is_empty() {
            items
                .iter()
                .filter(|i| i.id.as_deref() == Some(want))
                .collect()
        } else {
            by_name
        }
    };
    let (item_name, field, found) = match named(spec) {
        whole if !whole.is_empty() => (spec, None, whole),
        _ => match spec.rsplit_once('/') {
            Some((i, f)) if !i.is_empty() && !f.is_empty() => (i, Some(f), named(i)),
            _ => (spec, None, Vec::new()),
        },
    };
    let item = match found.as_slice() {
        [one] => *one,
        [] => {
            return Err(ImportError::NoItem {
                label: label.into(),
                item: spec.into(),
            })
        }
        many => {
            return Err(ImportError::SameName {
                label: label.into(),
                item: item_name.into(),
                count: many.len(),
                ids: many
                    .iter()
                    .map(|i| i.id.as_deref().unwrap_or("(none)"))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        }
    };
    let raw = match field {
        None => item
            .login
            .as_ref()
            .and_then(|l| l.password)
            .ok_or_else(|| ImportError::NoPassword {
                label: label.into(),
                item: item_name.into(),
            })?,
        Some(f) => {
            let fields = item.fields.as_deref().unwrap_or_default();
            let mut matching = fields.iter().filter(|x| x.name.as_deref() == Some(f));
            match (matching.next(), matching.next()) {
                (Some(one), None) => one.value.ok_or_else(|| ImportError::Empty {
                    label: label.into(),
                })?,
                (Some(_), Some(_)) => {
                    return Err(bad(format!(
                        "item {item_name:?} has more than one custom field named {f:?}; rename one in Bitwarden and export again"
                    )))
                }
                (None, _) => {
                    let names: Vec<&str> = fields.iter().filter_map(|x| x.name.as_deref()).collect();
                    return Err(ImportError::NoField {
                        label: label.into(),
                        item: item_name.into(),
                        field: f.into(),
                        fields: if names.is_empty() {
                            "none".into()
                        } else {
                            names.join(", ")
                        },
                    });
                }
            }
        }
    };
    if raw.get() == "null" {
        return Err(ImportError::Empty {
            label: label.into(),
        });
    }
    let value: Zeroizing<String> = serde_json::from_str(raw.get()).map_err(|_| {
        bad(format!(
            "item {item_name:?}: the value is not a JSON string"
        ))
    })?;
    Ok(exact(value.as_bytes()))
}
