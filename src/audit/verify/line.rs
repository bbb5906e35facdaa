//! Reading one `export-audit` line as a row: a fast path for each exact layout `export` writes (the
//! current one, `{"v":2,"prev","hash",` then the canonical row's members, and the first one,
//! `{"seq",…,"hash"}`) and serde for everything else. Each fast path accepts a subset of what
//! serde accepts and yields the same row (tested against serde on every line shape), so the
//! verdict never depends on which path read a line. The current layout's fast path also hands
//! over the row's hash, taken over the canonical text as it stands in the line: for every line
//! it accepts, that text is exactly what re-serialising the row gives (tested), so hashing it in
//! place changes nothing but the time.
use super::plain::Plain;
use super::RowRef;
use crate::audit::EXPORT_V2_PREFIX as V2_PREFIX;
use std::borrow::Cow;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportLine<'a> {
    /// 2 in the current format, absent in the first; the fields are the same.
    #[serde(default)]
    v: Option<u64>,
    seq: i64,
    #[serde(borrow)]
    ts: Cow<'a, str>,
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    session: Option<Cow<'a, str>>,
    #[serde(borrow)]
    action: Option<Cow<'a, str>>,
    #[serde(borrow)]
    body: &'a serde_json::value::RawValue,
    prev: &'a str,
    hash: &'a str,
}

/// Lowercase hex of exactly 32 bytes (as `export-audit` writes it), nothing else.
fn hex32(s: &str, field: &str) -> Result<[u8; 32], String> {
    crate::audit::hex32(s).ok_or_else(|| format!("{field} is not 64 lowercase hex digits"))
}

/// One export line as a row, given to `push` with the row's hash when the line held its canonical
/// text (else the caller computes it); `Err` says why it is not one, in words that follow `line N`
/// (the caller knows N). `quotes` is scratch space.
pub(super) fn parse_line(
    text: &[u8],
    quotes: &mut Vec<u64>,
    push: impl FnOnce(&RowRef<'_>, Option<[u8; 32]>),
) -> Result<(), String> {
    let (mut prev, mut hash) = ([0u8; 32], [0u8; 32]);
    if text.starts_with(V2_PREFIX.as_bytes()) {
        if let Some((row, computed)) = fast_v2(text, &mut prev, &mut hash, quotes) {
            push(&row, Some(computed));
            return Ok(());
        }
    } else if let Some(row) = fast(text, &mut prev, &mut hash, quotes) {
        push(&row, None);
        return Ok(());
    }
    parse_with_serde(text, |row| push(row, None))
}

/// The general reader: any JSON object with exactly the eight fields (and `"v":2`, or no `v`), in
/// any order and spacing.
pub(super) fn parse_with_serde(text: &[u8], push: impl FnOnce(&RowRef<'_>)) -> Result<(), String> {
    let l = serde_json::from_slice::<ExportLine<'_>>(text)
        .map_err(|e| format!(" is not a journal row: {e}"))?;
    if let Some(v) = l.v.filter(|v| *v != 2) {
        return Err(format!(
            " is in export format {v}, which this build does not read (it reads 2, and the first, with no \"v\")"
        ));
    }
    let prev = hex32(l.prev, "prev").map_err(|e| format!(": {e}"))?;
    let hash = hex32(l.hash, "hash").map_err(|e| format!(": {e}"))?;
    push(&RowRef {
        seq: l.seq,
        ts: &l.ts,
        kind: &l.kind,
        session: l.session.as_deref(),
        action: l.action.as_deref(),
        body: l.body.get(),
        prev: &prev,
        hash: &hash,
    });
    Ok(())
}

/// `{"v":2,"prev":"<64 hex>","hash":"<64 hex>",` then the canonical row after its `{`:
/// `"action":A,"body":B,"kind":"K","seq":N,"session":S,"ts":"T"}`, all of it after the hashes
/// plain (`Plain`); `None` for anything else. `prev` and `hash` receive the decoded hashes the
/// row borrows; the second value is blake3(prev ‖ `{` ‖ the rest of the line), the row's hash as
/// the chain defines it. `quotes` is scratch space.
pub(super) fn fast_v2<'a>(
    text: &'a [u8],
    prev: &'a mut [u8; 32],
    hash: &'a mut [u8; 32],
    quotes: &mut Vec<u64>,
) -> Option<(RowRef<'a>, [u8; 32])> {
    let s = std::str::from_utf8(text).ok()?;
    let rest = s.strip_prefix(V2_PREFIX)?;
    let (prev_hex, rest) = (rest.get(..64)?, rest.get(64..)?);
    let rest = rest.strip_prefix(r#"","hash":""#)?;
    let (hash_hex, rest) = (rest.get(..64)?, rest.get(64..)?);
    // The canonical row's members and its closing brace.
    let members = rest.strip_prefix(r#"","#)?;
    *prev = crate::audit::hex32(prev_hex)?;
    *hash = crate::audit::hex32(hash_hex)?;
    let mut p = Plain::new(members, quotes)?;
    p.eat(r#""action":"#)?;
    let action = p.opt_str()?;
    p.eat(r#","body":"#)?;
    let body = p.value()?;
    p.eat(r#","kind":"#)?;
    let kind = p.string()?;
    p.eat(r#","seq":"#)?;
    let seq = p.seq()?;
    p.eat(r#","session":"#)?;
    let session = p.opt_str()?;
    p.eat(r#","ts":"#)?;
    let ts = p.string()?;
    p.eat("}")?;
    if !p.done() {
        return None;
    }
    let mut h = blake3::Hasher::new();
    h.update(&prev[..]);
    h.update(b"{");
    h.update(members.as_bytes());
    let computed = *h.finalize().as_bytes();
    let row = RowRef {
        seq,
        ts,
        kind,
        session,
        action,
        body,
        prev,
        hash,
    };
    Some((row, computed))
}

/// `{"seq":N,"ts":"…","kind":"…","session":"…"|null,"action":"…"|null,"body":…,"prev":"<64
/// hex>","hash":"<64 hex>"}` exactly as the first format's `export` wrote it, all of it plain
/// (`Plain`); `None` for anything else (serde reads those, and says what is wrong with a line
/// that is not a row). `prev` and `hash` receive the decoded hashes the row borrows.
pub(super) fn fast<'a>(
    text: &'a [u8],
    prev: &'a mut [u8; 32],
    hash: &'a mut [u8; 32],
    quotes: &mut Vec<u64>,
) -> Option<RowRef<'a>> {
    let s = std::str::from_utf8(text).ok()?;
    let mut p = Plain::new(s, quotes)?;
    p.eat(r#"{"seq":"#)?;
    let seq = p.seq()?;
    p.eat(r#","ts":"#)?;
    let ts = p.string()?;
    p.eat(r#","kind":"#)?;
    let kind = p.string()?;
    p.eat(r#","session":"#)?;
    let session = p.opt_str()?;
    p.eat(r#","action":"#)?;
    let action = p.opt_str()?;
    p.eat(r#","body":"#)?;
    let body = p.value()?;
    p.eat(r#","prev":"#)?;
    *prev = crate::audit::hex32(p.string()?)?;
    p.eat(r#","hash":"#)?;
    *hash = crate::audit::hex32(p.string()?)?;
    p.eat("}")?;
    p.done().then_some(RowRef {
        seq,
        ts,
        kind,
        session,
        action,
        body,
        prev,
        hash,
    })
}

#[cfg(test)]
#[path = "line_tests.rs"]
mod tests;
