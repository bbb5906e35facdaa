use super::env::parse;
use super::*;

fn value(text: &str, key: &str) -> Option<String> {
    let all = parse(text.as_bytes(), key).ok()?;
    let b = all.into_iter().find(|b| b.key == key)?;
    Some(String::from_utf8(b.value.unwrap().to_vec()).unwrap())
}

#[test]
fn dotenv_values_as_dotenv_reads_them() {
    let text = "# comment\n\nexport A=plain\nB = spaced = kept \nC='sin gle \\n $X'\n\
                D=\"dq \\\"x\\\" \\n\\t\\\\ \\$ \\q\"  # trailing\nE=abc#notcomment #comment\n\
                F=\"line1\nline2\"\nG=`back tick`\n  H=\t'x' \r\nI=\n";
    assert_eq!(value(text, "A").unwrap(), "plain");
    assert_eq!(value(text, "B").unwrap(), "spaced = kept");
    assert_eq!(value(text, "C").unwrap(), "sin gle \\n $X");
    assert_eq!(value(text, "D").unwrap(), "dq \"x\" \n\t\\ $ \\q");
    assert_eq!(value(text, "E").unwrap(), "abc#notcomment");
    assert_eq!(value(text, "F").unwrap(), "line1\nline2");
    assert_eq!(value(text, "G").unwrap(), "back tick");
    assert_eq!(value(text, "H").unwrap(), "x");
    assert_eq!(value(text, "I").unwrap(), "");
    assert_eq!(value(text, "export"), None);
    // Line numbers count the lines of a multi-line value.
    let all = parse(text.as_bytes(), "G").unwrap();
    assert_eq!(all.iter().find(|b| b.key == "G").unwrap().line, 10);
}

#[test]
fn spans_cover_the_binding_and_not_the_line_break() {
    let text = "A=1\r\n  export B=\"x\ny\"  # c\r\nC=3";
    let all = parse(text.as_bytes(), "B").unwrap();
    let b = all.iter().find(|b| b.key == "B").unwrap();
    assert_eq!(&text[b.span.clone()], "  export B=\"x\ny\"  # c");
    let c = all.iter().find(|b| b.key == "C").unwrap();
    assert_eq!(&text[c.span.clone()], "C=3");
}

#[test]
fn a_malformed_wanted_value_is_an_error_another_is_skipped() {
    let text = "A=\"open\nB=2\n";
    assert_eq!(
        parse(text.as_bytes(), "A").err(),
        Some((1, "its quote is never closed"))
    );
    assert_eq!(value(text, "B").unwrap(), "2");
    assert!(parse(b"A='x' y\n", "A").is_err());
}

#[test]
fn sources_parse_and_errors_never_repeat_the_string() {
    assert_eq!(
        Source::parse("env:.env#API_KEY").unwrap(),
        Source::Env {
            file: ".env".into(),
            key: "API_KEY".into()
        }
    );
    assert_eq!(
        Source::parse("bitwarden:/tmp/x.json#GitHub/token").unwrap(),
        Source::Bitwarden {
            file: "/tmp/x.json".into(),
            item: "GitHub/token".into()
        }
    );
    assert_eq!(
        Source::parse("pass:web/github").unwrap(),
        Source::Pass {
            entry: "web/github".into()
        }
    );
    assert!(Source::parse("keepassxc:db.kdbx#e").unwrap().reads_stdin());
    for bad in [
        "s3cr3tvalue",
        "env:s3cr3tvalue",
        "nope:s3cr3tvalue",
        "pass:",
        "env:#K",
    ] {
        let e = Source::parse(bad).unwrap_err().to_string();
        assert!(!e.contains("s3cr3t"), "{e}");
    }
    assert!(matches!(
        Source::parse("openbao:kv/x#y"),
        Err(ImportError::OpenBao)
    ));
}
