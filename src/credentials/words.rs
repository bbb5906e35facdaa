//! Shell words for the command allowlist. A strict splitter, not a shell: it accepts a small
//! grammar and refuses everything else rather than interpret it.
//!
//! - Words are separated by spaces. A word's value is *plain*: one or more ASCII letters,
//!   digits or `_ - . / : , + = @ %`. It is written bare, or whole in single quotes (`'x'` is
//!   the word `x`; this is how the vault sends words, so what it sends splits to the same words).
//! - Operators: `;` `&` `&&` `|` `||` `|&` `(` `)` and the redirections `<` `>` `>>` `>|` `<>`
//!   `<<` `<<-` `<<<` `<&` `>&` `&>` `&>>`, with the file descriptor written against them
//!   (`2>`). They need no spaces around them, as in a shell.
//! - Anything else is refused: `$`, backticks, `"`, `\`, quotes inside a word, `~`, `{ }`,
//!   `* ? [ ]` (in a pattern, `*` and `?` are its wildcards), `#`, `!`, tabs and other
//!   controls, non-ASCII.
//!
//! A pattern splits the same way. A pattern word that is just `*` matches one or more whole
//! words; a pattern word containing `*` (any run) or `?` (one character) matches one word; any
//! other pattern word matches only the identical word, and an operator only the same operator.
//! A wildcard never matches an operator, nor a word beginning with `-` unless the pattern word
//! begins with `-` itself: options are admitted only where the pattern spells them.
use std::fmt;

/// One token of a command or a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Token {
    /// A word's value (plain, or in a pattern plain plus `*`/`?`), without its quotes.
    Word(String),
    /// An operator as written, a redirection with its file descriptor (`2>`).
    Op(String),
}

/// Why a string is not plain words and operators.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum WordError {
    #[error("{what} (`{ch}`, character {at}) is not allowed")]
    Syntax {
        ch: Printable,
        at: usize,
        what: &'static str,
    },
    #[error(
        "a quote at character {at} does not make a whole word; quote a word whole, or not at all"
    )]
    PartQuoted { at: usize },
    #[error("the quote at character {at} is not closed")]
    Unclosed { at: usize },
    #[error("the quoted word at character {at} is empty")]
    Empty { at: usize },
}

/// A character shown in an error message: itself when printable ASCII, else `U+XXXX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Printable(char);

impl fmt::Display for Printable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_ascii_graphic() || self.0 == ' ' {
            write!(f, "{}", self.0)
        } else {
            write!(f, "U+{:04X}", self.0 as u32)
        }
    }
}

/// Operators, longest first.
const OPERATORS: &[&str] = &[
    "<<<", "<<-", "&>>", "&&", "||", "|&", ">>", ">|", ">&", "<<", "<&", "<>", "&>", ";", "&", "|",
    "(", ")", "<", ">",
];

pub(crate) fn is_plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_-./:,+=@%".contains(c)
}

fn is_operator_start(c: char) -> bool {
    ";&|()<>".contains(c)
}

/// What a refused character is, for the message.
fn what(c: char) -> &'static str {
    match c {
        '$' => "expansion",
        '`' => "command substitution",
        '"' | '\\' => "quoting",
        '~' => "home directory expansion",
        '{' | '}' => "brace expansion",
        '*' | '?' | '[' | ']' => "a file name pattern",
        '#' => "a comment",
        '!' => "history expansion or negation",
        c if c.is_whitespace() => "a space other than ' '",
        c if c.is_control() => "a control character",
        c if !c.is_ascii() => "a non-ASCII character",
        _ => "a shell special character",
    }
}

fn operator_at(s: &[char], i: usize) -> Option<&'static str> {
    OPERATORS.iter().copied().find(|op| {
        op.chars()
            .enumerate()
            .all(|(k, c)| s.get(i + k) == Some(&c))
    })
}

/// Splits a command (`pattern` false) or a pattern (`pattern` true: bare words may also hold the
/// wildcards `*` and `?`) into tokens.
pub(crate) fn split(text: &str, pattern: bool) -> Result<Vec<Token>, WordError> {
    let s: Vec<char> = text.chars().collect();
    let refuse = |i: usize| WordError::Syntax {
        ch: Printable(s[i]),
        at: i + 1,
        what: what(s[i]),
    };
    let ends_word = |i: usize| s.get(i).is_none_or(|&c| c == ' ' || is_operator_start(c));
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c == ' ' {
            i += 1;
        } else if let Some(op) = operator_at(&s, i) {
            out.push(Token::Op(op.to_owned()));
            i += op.len();
        } else if c == '\'' {
            let close = (i + 1..s.len())
                .find(|&j| s[j] == '\'')
                .ok_or(WordError::Unclosed { at: i + 1 })?;
            if !ends_word(close + 1) {
                return Err(WordError::PartQuoted { at: close + 2 });
            }
            if close == i + 1 {
                return Err(WordError::Empty { at: i + 1 });
            }
            if let Some(j) = (i + 1..close).find(|&j| !is_plain(s[j])) {
                return Err(refuse(j));
            }
            out.push(Token::Word(s[i + 1..close].iter().collect()));
            i = close + 1;
        } else {
            let start = i;
            while !ends_word(i) {
                match s[i] {
                    '\'' => return Err(WordError::PartQuoted { at: i + 1 }),
                    '*' | '?' if pattern => {}
                    c if is_plain(c) => {}
                    _ => return Err(refuse(i)),
                }
                i += 1;
            }
            let word: String = s[start..i].iter().collect();
            // A file descriptor written against a redirection belongs to it (`2>`).
            let redirect = s.get(i).is_some_and(|&c| c == '<' || c == '>');
            match operator_at(&s, i) {
                Some(op) if redirect && word.bytes().all(|b| b.is_ascii_digit()) => {
                    out.push(Token::Op(format!("{word}{op}")));
                    i += op.len();
                }
                _ => out.push(Token::Word(word)),
            }
        }
    }
    Ok(out)
}

/// A pattern split into what each of its tokens matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Part {
    /// Exactly this word.
    Literal(String),
    /// One word matching this glob.
    Glob(String),
    /// One or more whole words (a pattern word that is just `*`).
    Words,
    /// Exactly this operator.
    Op(String),
}

/// Splits an allowlist pattern.
pub(crate) fn compile(pattern: &str) -> Result<Vec<Part>, WordError> {
    Ok(split(pattern, true)?
        .into_iter()
        .map(|t| match t {
            Token::Op(o) => Part::Op(o),
            Token::Word(w) if w == "*" => Part::Words,
            Token::Word(w) if w.contains(['*', '?']) => Part::Glob(w),
            Token::Word(w) => Part::Literal(w),
        })
        .collect())
}

/// A word a wildcard may match: not an option (a command's words are plain by construction).
fn wild_ok(t: &Token) -> bool {
    matches!(t, Token::Word(w) if !w.starts_with('-'))
}

fn one(p: &Part, t: &Token) -> bool {
    match (p, t) {
        (Part::Literal(a), Token::Word(b)) | (Part::Op(a), Token::Op(b)) => a == b,
        (Part::Glob(g), Token::Word(w)) => {
            (g.starts_with('-') || !w.starts_with('-')) && glob_match(g, w)
        }
        _ => false,
    }
}

/// Whether the pattern's parts match the command's tokens, whole.
pub(crate) fn matches(parts: &[Part], tokens: &[Token]) -> bool {
    // reach[k]: the parts so far match exactly tokens[..k].
    let mut reach = vec![false; tokens.len() + 1];
    reach[0] = true;
    for p in parts {
        let mut next = vec![false; tokens.len() + 1];
        let mut open = false;
        for k in 1..=tokens.len() {
            next[k] = match p {
                Part::Words => {
                    open = (reach[k - 1] || open) && wild_ok(&tokens[k - 1]);
                    open
                }
                _ => reach[k - 1] && one(p, &tokens[k - 1]),
            };
        }
        reach = next;
        if !reach.contains(&true) {
            return false;
        }
    }
    reach[tokens.len()]
}

/// Glob over one word: `*` is any run of characters, `?` one character, all else literal.
pub(crate) fn glob_match(pattern: &str, word: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let w: Vec<char> = word.chars().collect();
    let mut reach = vec![false; w.len() + 1];
    reach[0] = true;
    for &pc in &p {
        let mut next = vec![false; w.len() + 1];
        let mut open = false;
        for j in 0..=w.len() {
            next[j] = match pc {
                '*' => {
                    open = open || reach[j];
                    open
                }
                '?' => j > 0 && reach[j - 1],
                lit => j > 0 && reach[j - 1] && w[j - 1] == lit,
            };
        }
        reach = next;
    }
    reach[w.len()]
}

/// The tokens as the vault sends them: every word single-quoted (a plain value holds no quote),
/// operators as they are, one space between tokens.
pub(crate) fn quoted(tokens: &[Token]) -> String {
    join(tokens, |w| format!("'{w}'"))
}

/// The tokens with bare words: what the quoted form means to a shell.
pub(crate) fn unquoted(tokens: &[Token]) -> String {
    join(tokens, str::to_owned)
}

fn join(tokens: &[Token], word: impl Fn(&str) -> String) -> String {
    let parts: Vec<String> = tokens
        .iter()
        .map(|t| match t {
            Token::Word(w) => word(w),
            Token::Op(o) => o.clone(),
        })
        .collect();
    parts.join(" ")
}

/// Whether an allowlist pattern splits into words, wildcards and operators (checked when a
/// credential is added or edited); the error says what is wrong with it.
pub(crate) fn check_pattern(pattern: &str) -> Result<(), String> {
    compile(pattern).map(drop).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn next(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        *seed >> 33
    }

    /// Seeded random strings over the characters that matter: a word holds plain characters
    /// only, and the form the vault sends splits to the same tokens (what is stored validates
    /// to itself at dispatch).
    #[test]
    fn the_sent_form_splits_to_the_same_tokens() {
        const CHARS: &[char] = &[
            'a', '-', '2', '=', ' ', ' ', '\'', ';', '&', '|', '<', '>', '(', ')', '$', '"', '\\',
            '*', '#', '~', '{',
        ];
        let (mut seed, mut accepted) = (0x9e37_79b9_7f4a_7c15_u64, 0);
        for _ in 0..20_000 {
            let len = next(&mut seed) % 12;
            let s: String = (0..len)
                .map(|_| CHARS[(next(&mut seed) % CHARS.len() as u64) as usize])
                .collect();
            let Ok(tokens) = split(&s, false) else {
                continue;
            };
            accepted += 1;
            for t in &tokens {
                if let Token::Word(w) = t {
                    assert!(!w.is_empty() && w.chars().all(is_plain), "{s:?}: {w:?}");
                }
            }
            let sent = quoted(&tokens);
            assert_eq!(split(&sent, false), Ok(tokens), "{s:?} sent as {sent:?}");
        }
        assert!(accepted > 1000, "only {accepted} strings split");
    }
}
