use super::*;

fn cap(keep: Keep, per_call: usize, budget: &Arc<Budget>) -> Capture {
    Capture::new("stderr", keep, per_call, budget, Scrubber::default())
}

#[test]
fn a_tail_keeps_the_last_bytes_counts_all_and_says_so() {
    let budget = Budget::new(1 << 20);
    let mut c = cap(Keep::Tail, 16384, &budget);
    let mut all = Vec::new();
    for i in 0..36_864u32 {
        let line = format!("diag {i}\n");
        all.extend_from_slice(line.as_bytes());
        c.push(line.as_bytes());
    }
    let seen = all.len();
    let done = c.finish();
    assert_eq!(done.bytes_seen, seen as u64);
    assert_eq!(done.bytes_retained, 16384);
    assert!(all.ends_with(done.text.as_bytes()));
    let e = done.excerpt(16384);
    assert!(e.truncated);
    assert_eq!(
        e.text.lines().next().unwrap(),
        format!("[stderr truncated: kept last 16384 of {seen} bytes]")
    );
    let short = done.excerpt(4096);
    let first = short.text.lines().next().unwrap();
    assert_eq!(
        first,
        format!("[stderr truncated: kept last 16384 of {seen} bytes; showing the last 4096]")
    );
    assert_eq!(short.text.len(), first.len() + 1 + 4096);
    assert!(short.text.ends_with("diag 36863\n"));
}

#[test]
fn short_output_is_whole_and_unmarked() {
    let budget = Budget::new(1 << 20);
    let mut c = cap(Keep::Tail, 16384, &budget);
    c.push(b"hi\n");
    let done = c.finish();
    assert_eq!(
        done.excerpt(4096),
        Excerpt {
            text: "hi\n".into(),
            truncated: false
        }
    );
    assert_eq!(done.bytes_retained, 3);
}

#[test]
fn utf8_split_across_chunks_decodes_at_every_split() {
    let text = "héllo wörld ✓ 😀 end";
    let bytes = text.as_bytes();
    for split in 0..=bytes.len() {
        let budget = Budget::new(1 << 20);
        let mut c = cap(Keep::Tail, 1024, &budget);
        c.push(&bytes[..split]);
        c.push(&bytes[split..]);
        assert_eq!(c.finish().text, text, "split at {split}");
    }
    let budget = Budget::new(1 << 20);
    let mut c = cap(Keep::Head, 1024, &budget);
    for b in bytes {
        c.push(std::slice::from_ref(b));
    }
    assert_eq!(c.finish().text, text);
}

#[test]
fn a_cut_inside_a_character_is_trimmed_not_replaced() {
    // "é" is two bytes; 5001 of them plus "x": a 16-byte tail starts on a continuation byte.
    let mut data = "é".repeat(5001).into_bytes();
    data.push(b'x');
    let budget = Budget::new(1 << 20);
    let mut tail = cap(Keep::Tail, 16, &budget);
    tail.push(&data);
    let t = tail.finish();
    assert_eq!(t.text, format!("{}x", "é".repeat(7)));
    let budget = Budget::new(1 << 20);
    let mut head = cap(Keep::Head, 15, &budget);
    head.push(&data);
    let h = head.finish();
    assert_eq!(h.text, "é".repeat(7));
    assert!(h
        .excerpt(100)
        .text
        .ends_with("[stderr truncated: kept first 15 of 10003 bytes]"));
}

#[test]
fn invalid_utf8_becomes_replacement_characters() {
    let budget = Budget::new(1 << 20);
    let mut c = cap(Keep::Tail, 1024, &budget);
    c.push(b"ok \xff\xfe bad \xc0\n\xed\xa0\x80 end");
    let done = c.finish();
    assert_eq!(
        done.text,
        "ok \u{fffd}\u{fffd} bad \u{fffd}\n\u{fffd}\u{fffd}\u{fffd} end"
    );
    assert!(!done.dropped);
}

#[test]
fn streams_are_drained_and_counted_past_a_spent_budget() {
    let budget = Budget::new(0);
    let mut c = cap(Keep::Tail, 16384, &budget);
    for _ in 0..100 {
        c.push(&[b'y'; 1000]);
    }
    let done = c.finish();
    assert_eq!((done.bytes_seen, done.bytes_retained), (100_000, 0));
    assert_eq!(
        done.excerpt(4096).text,
        "[stderr truncated: kept last 0 of 100000 bytes (the process-wide budget was in use by other calls)]\n"
    );
}

#[test]
fn concurrent_captures_never_hold_more_than_the_process_budget() {
    let total = 64 * 1024;
    let budget = Budget::new(total);
    let mut caps: Vec<Capture> = (0..8).map(|_| cap(Keep::Tail, 16384, &budget)).collect();
    let chunk = vec![b'd'; 1500];
    for round in 0..700 {
        for c in caps.iter_mut() {
            c.push(&chunk[..(round % 1500) + 1]);
        }
        let held: usize = caps.iter().map(Capture::held).sum();
        let reserved: usize = caps.iter().map(|c| c.reservation.bytes()).sum();
        assert!(
            held <= reserved && reserved <= total,
            "round {round}: {held} / {reserved}"
        );
        assert_eq!(budget.free() + reserved, total);
    }
    let done: Vec<Captured> = caps.into_iter().map(Capture::finish).collect();
    let retained: usize = done.iter().map(|d| d.bytes_retained).sum();
    assert!(retained <= total);
    assert!(done.iter().all(|d| d.bytes_retained <= 16384));
    assert!(done
        .iter()
        .any(|d| d.budget_short && d.bytes_retained < 16384));
    drop(done);
    assert_eq!(budget.free(), total, "reservations come back");
}

#[test]
fn secrets_are_scrubbed_before_the_ring_can_cut_them() {
    let secret = b"S3cretPassw0rd!";
    let mut data = b"xxxxxxxx".to_vec();
    data.extend_from_slice(secret);
    data.extend_from_slice(b"yy");
    for limit in 1..data.len() + 20 {
        for split in 0..data.len() {
            let budget = Budget::new(1 << 20);
            let scrub = Scrubber::new(vec![Redactor::new(secret, None, "c")]);
            let mut c = Capture::new("stdout", Keep::Tail, limit, &budget, scrub);
            c.push(&data[..split]);
            c.push(&data[split..]);
            let text = c.finish().text;
            for w in secret.windows(4) {
                assert!(
                    !text.as_bytes().windows(4).any(|t| t == w),
                    "limit {limit} split {split}: {text:?} holds part of the secret"
                );
            }
        }
    }
    let budget = Budget::new(1 << 20);
    let scrub = Scrubber::new(vec![
        Redactor::new(b"first-secret", None, "a"),
        Redactor::new(b"second-secret", None, "b"),
    ]);
    let mut c = Capture::new("stdout", Keep::Tail, 1024, &budget, scrub);
    for b in b"1 first-secret 2 second-secret 3" {
        c.push(std::slice::from_ref(b));
    }
    assert_eq!(c.finish().text, "1 [REDACTED:a] 2 [REDACTED:b] 3");
}

/// What a capture holds at once — its retained bytes and the scrubber's held-back tail (kept so a
/// secret split across chunks is still found) — is always inside its reservation from the process
/// budget, however short the budget is: the budget's `peak` is then the true most held at once.
#[test]
fn the_scrubbers_held_back_bytes_count_against_the_budget() {
    // A 400-byte secret: its longest encoding (\uXXXX per byte) is 2,400 bytes, all of which a
    // scrubber may hold back between chunks.
    let secret = vec![b'k'; 400];
    let scrubber = || Scrubber::new(vec![Redactor::new(&secret, None, "box")]);
    for total in [0, 1000, 2399, 2400, 5000, 20_000] {
        let budget = Budget::new(total);
        let mut c = Capture::new("stderr", Keep::Tail, 16384, &budget, scrubber());
        for i in 0..2000u32 {
            // Lines that end in a prefix of the secret, so the scrubber holds back a tail.
            let chunk = format!("line {i} ").into_bytes();
            c.push(&chunk);
            // Now and then the whole secret, split across two chunks.
            let cut = (i as usize % 399) + 1;
            c.push(&secret[..cut]);
            if i % 97 == 0 {
                c.push(&secret[cut..]);
            }
            let held = c.held() + c.scrub.pending();
            let reserved = total - budget.free();
            assert!(
                held <= reserved,
                "budget {total}: holds {held} bytes with {reserved} reserved (chunk {i})"
            );
        }
        let done = c.finish();
        assert!(done.bytes_retained <= total, "budget {total}: {done:?}");
        let whole = String::from_utf8(secret.clone()).unwrap();
        assert!(
            !done.text.contains(&whole),
            "budget {total}: the secret was kept"
        );
        assert!(budget.peak() <= total);
    }
}
