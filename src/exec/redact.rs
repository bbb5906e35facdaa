//! Scrubbing a secret out of everything an executor returns: the raw bytes and the encodings a
//! target could echo (base64 standard and URL-safe, percent-encoded, basic-auth `user:secret`
//! base64, JSON-escaped), replaced by `[REDACTED:<credential>]`, across chunk boundaries, before
//! anything is retained, returned, logged or journaled.
use zeroize::Zeroizing;

/// A streaming scrubber for one secret.
pub struct Redactor {
    patterns: Vec<Zeroizing<Vec<u8>>>,
    marker: Vec<u8>,
    held: Vec<u8>,
    longest: usize,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} patterns, <redacted>)", self.patterns.len())
    }
}

fn b64(alphabet: &[u8; 64], data: &[u8], pad: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = [(n >> 18) & 63, (n >> 12) & 63, (n >> 6) & 63, n & 63];
        for (i, c) in chars.iter().enumerate() {
            if i <= chunk.len() {
                out.push(alphabet[*c as usize]);
            } else if pad {
                out.push(b'=');
            }
        }
    }
    out
}

const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn percent(data: &[u8], upper: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for &c in data {
        if c.is_ascii_alphanumeric() || b"-._~".contains(&c) {
            out.push(c);
        } else if upper {
            out.extend_from_slice(format!("%{c:02X}").as_bytes());
        } else {
            out.extend_from_slice(format!("%{c:02x}").as_bytes());
        }
    }
    out
}

fn json_escaped(data: &[u8]) -> Vec<u8> {
    let s = String::from_utf8_lossy(data);
    let quoted = serde_json::to_string(&s).unwrap_or_default();
    quoted.as_bytes()[1..quoted.len() - 1].to_vec()
}

impl Redactor {
    /// A scrubber for `secret`; `basic_user` adds the basic-auth `user:secret` form.
    pub fn new(secret: &[u8], basic_user: Option<&str>, credential: &str) -> Self {
        let mut forms: Vec<Vec<u8>> = vec![
            secret.to_vec(),
            b64(STD, secret, true),
            b64(STD, secret, false),
            b64(URL, secret, false),
            percent(secret, true),
            percent(secret, false),
            json_escaped(secret),
            json_escaped(secret)
                .iter()
                .flat_map(|&c| if c == b'/' { b"\\/".to_vec() } else { vec![c] })
                .collect(),
        ];
        if let Some(user) = basic_user {
            let mut pair = user.as_bytes().to_vec();
            pair.push(b':');
            pair.extend_from_slice(secret);
            forms.push(b64(STD, &pair, true));
            forms.push(b64(STD, &pair, false));
        }
        forms.retain(|f| !f.is_empty());
        forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
        forms.dedup();
        let longest = forms.first().map_or(1, Vec::len);
        Self {
            patterns: forms.into_iter().map(Zeroizing::new).collect(),
            marker: format!("[REDACTED:{credential}]").into_bytes(),
            held: Vec::new(),
            longest,
        }
    }

    fn replace_all(&self, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(data.len());
        let mut i = 0;
        'scan: while i < data.len() {
            for p in &self.patterns {
                if data[i..].starts_with(p) {
                    out.extend_from_slice(&self.marker);
                    i += p.len();
                    continue 'scan;
                }
            }
            out.push(data[i]);
            i += 1;
        }
        out
    }

    /// Feeds a chunk; returns the scrubbed bytes that can no longer be part of a match.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.held.extend_from_slice(chunk);
        let keep = self.longest.saturating_sub(1).min(self.held.len());
        let cut = self.held.len() - keep;
        // Find a safe cut: no pattern may start before `cut` and end after it.
        let mut safe = cut;
        while let Some(start) = self.straddling(safe) {
            safe = start;
        }
        let ready: Vec<u8> = self.held.drain(..safe).collect();
        self.replace_all(&ready)
    }

    /// The start of a match that begins before `cut` and ends after it, if any.
    fn straddling(&self, cut: usize) -> Option<usize> {
        self.patterns.iter().find_map(|p| {
            (cut.saturating_sub(p.len() - 1)..cut).find(|&start| {
                let end = start + p.len();
                end > cut && end <= self.held.len() && self.held[start..end] == p[..]
            })
        })
    }

    /// Flushes what is held at the end of the stream.
    pub fn finish(&mut self) -> Vec<u8> {
        let rest = std::mem::take(&mut self.held);
        self.replace_all(&rest)
    }

    /// Scrubs a complete value (a header, an error message).
    pub fn scrub(&self, data: &[u8]) -> Vec<u8> {
        self.replace_all(data)
    }

    pub fn scrub_str(&self, s: &str) -> String {
        String::from_utf8_lossy(&self.replace_all(s.as_bytes())).into_owned()
    }
}

/// Standard base64 with padding (for the basic-auth header).
pub fn base64_std(data: &[u8]) -> String {
    String::from_utf8(b64(STD, data, true)).expect("base64 is ASCII")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"s3cr3t/T0ken+value?x=1";

    fn forms(r: &Redactor) -> Vec<Vec<u8>> {
        r.patterns.iter().map(|p| p.to_vec()).collect()
    }

    #[test]
    fn every_encoding_is_scrubbed_at_every_chunk_boundary() {
        let r0 = Redactor::new(SECRET, Some("alice"), "api");
        for form in forms(&r0) {
            let mut text = b"before ".to_vec();
            text.extend_from_slice(&form);
            text.extend_from_slice(b" middle ");
            text.extend_from_slice(&form);
            text.extend_from_slice(b" after");
            for split in 1..text.len() {
                let mut r = Redactor::new(SECRET, Some("alice"), "api");
                let mut out = r.push(&text[..split]);
                out.extend(r.push(&text[split..]));
                out.extend(r.finish());
                let s = String::from_utf8_lossy(&out);
                assert_eq!(
                    s,
                    "before [REDACTED:api] middle [REDACTED:api] after",
                    "form {:?} split {split}",
                    String::from_utf8_lossy(&form)
                );
            }
        }
    }

    #[test]
    fn byte_by_byte_and_known_encodings() {
        assert_eq!(b64(STD, b"alice:pw", true), b"YWxpY2U6cHc=");
        assert_eq!(b64(URL, &[0xfb, 0xff], false), b"-_8");
        assert_eq!(percent(b"a/b c", true), b"a%2Fb%20c");
        let mut r = Redactor::new(SECRET, None, "x");
        let input = [b"xx".as_slice(), SECRET, b"yy"].concat();
        let mut out = Vec::new();
        for b in &input {
            out.extend(r.push(std::slice::from_ref(b)));
        }
        out.extend(r.finish());
        assert_eq!(out, b"xx[REDACTED:x]yy");
        assert_eq!(r.scrub_str("no secret here"), "no secret here");
        assert!(!format!("{r:?}").contains("s3cr3t"));
    }
}
