use super::*;

fn key(b: u8) -> [u8; 32] {
    [b; 32]
}

fn line(bytes: &[u8]) -> &[u8] {
    bytes.strip_suffix(b"\n").unwrap()
}

/// A handshake between the two ends; returns (client sealer, client opener, agent sealer,
/// agent opener).
fn pair(
    client_psk: [u8; 32],
    agent_psk: [u8; 32],
) -> Result<(Sealer, Opener, Sealer, Opener), ChannelError> {
    let (init, open_line) = Initiator::start(&client_psk, "vlt_a")?;
    let open: Open = serde_json::from_slice(line(&open_line)).unwrap();
    let (a_seal, a_open, accept) = respond(&agent_psk, "vlt_a", &open)?;
    let (c_seal, c_open) = init.finish(line(&accept))?;
    Ok((c_seal, c_open, a_seal, a_open))
}

/// The messages of a sealed run, each without its length (checking every length).
fn messages(sealed: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = sealed;
    while !rest.is_empty() {
        let n = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
        out.push(&rest[2..2 + n]);
        rest = &rest[2 + n..];
    }
    out
}

fn open_all(o: &mut Opener, sealed: &[u8]) -> Result<Vec<Vec<u8>>, ChannelError> {
    let mut frames = Vec::new();
    for m in messages(sealed) {
        if let Some(f) = o.open(m)? {
            frames.push(f.to_vec());
        }
    }
    Ok(frames)
}

#[test]
fn frames_cross_both_ways_and_big_ones_are_chunked() {
    let (mut cs, mut co, mut as_, mut ao) = pair(key(1), key(1)).unwrap();
    let small = br#"{"id":1,"req":{"op":"status"}}"#;
    assert_eq!(
        open_all(&mut ao, &cs.seal(small)).unwrap(),
        vec![small.to_vec()]
    );
    let big: Vec<u8> = (0..200_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let sealed = as_.seal(&big);
    let sizes: Vec<usize> = messages(&sealed).iter().map(|m| m.len()).collect();
    assert_eq!(sizes.len(), 4, "200 kB is four chunks");
    assert_eq!(sizes[0], MAX_MESSAGE, "a full chunk fills a Noise message");
    assert_eq!(
        sealed.len(),
        big.len() + 4 * (2 + 1 + TAG),
        "binary: no base64"
    );
    assert_eq!(open_all(&mut co, &sealed).unwrap(), vec![big.clone()]);
    let empty = as_.seal(b"");
    assert_eq!(open_all(&mut co, &empty).unwrap(), vec![Vec::<u8>::new()]);
    // Nothing of the plaintext shows in the lines.
    let secret = b"DECOY_channel_secret_7f1";
    let sealed = cs.seal(secret);
    assert!(!sealed.windows(secret.len()).any(|w| w == secret));
}

#[test]
fn another_key_or_another_vault_cannot_complete_the_handshake() {
    assert!(matches!(pair(key(1), key(2)), Err(ChannelError::Handshake)));
    let (_, open_line) = Initiator::start(&key(1), "vlt_a").unwrap();
    let open: Open = serde_json::from_slice(line(&open_line)).unwrap();
    assert!(
        respond(&key(1), "vlt_b", &open).is_err(),
        "the vault id is in the prologue"
    );
    // An impostor agent without the key answers something: the client refuses it.
    let (init, _) = Initiator::start(&key(1), "vlt_a").unwrap();
    let (_, mut other_open) = Initiator::start(&key(3), "vlt_a").unwrap();
    other_open.pop();
    let fake: Open = serde_json::from_slice(&other_open).unwrap();
    let fake_accept = serde_json::to_vec(&Accept { noise: fake.noise }).unwrap();
    assert!(init.finish(&fake_accept).is_err());
}

#[test]
fn altered_replayed_reordered_or_dropped_messages_are_refused() {
    let (mut cs, _, _, mut ao) = pair(key(1), key(1)).unwrap();
    let one = cs.seal(b"one");
    let two = cs.seal(b"two");
    let mut altered = messages(&one)[0].to_vec();
    altered[5] ^= 1;
    assert!(matches!(ao.open(&altered), Err(ChannelError::Tampered)));
    assert!(
        matches!(ao.open(messages(&two)[0]), Err(ChannelError::Tampered)),
        "the second message before the first (the first dropped)"
    );
    assert_eq!(open_all(&mut ao, &one).unwrap(), vec![b"one".to_vec()]);
    assert!(
        matches!(ao.open(messages(&one)[0]), Err(ChannelError::Tampered)),
        "replayed"
    );
    assert!(
        matches!(
            ao.open(&messages(&two)[0][..TAG]),
            Err(ChannelError::Malformed(_))
        ),
        "a message with no room for a flag byte"
    );
    assert_eq!(open_all(&mut ao, &two).unwrap(), vec![b"two".to_vec()]);
}

#[test]
fn a_refused_message_leaves_the_frame_being_reassembled_as_it_was() {
    let (mut cs, _, _, mut ao) = pair(key(1), key(1)).unwrap();
    let big: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let sealed = cs.seal(&big);
    let ms = messages(&sealed);
    assert_eq!(ao.open(ms[0]).unwrap(), None);
    let mut altered = ms[1].to_vec();
    altered[100] ^= 0x80;
    assert!(matches!(ao.open(&altered), Err(ChannelError::Tampered)));
    assert_eq!(
        ao.partial.len(),
        CHUNK,
        "only the first chunk, no bytes of the refused one"
    );
    assert!(ao.partial[..].iter().zip(&big).all(|(a, b)| a == b));
    assert_eq!(
        ao.open(ms[1]).unwrap().as_deref().map(|f| f.to_vec()),
        Some(big)
    );
}

#[test]
fn a_frame_past_the_cap_is_refused_while_it_arrives() {
    let (mut cs, _, _, mut ao) = pair(key(1), key(1)).unwrap();
    let big = vec![b'x'; MAX_FRAME + 1];
    let sealed = cs.seal(&big);
    let mut result = Ok(None);
    for m in messages(&sealed) {
        result = ao.open(m);
        if result.is_err() {
            break;
        }
    }
    assert!(matches!(result, Err(ChannelError::TooLong)));
}

#[test]
fn any_run_of_frames_in_any_pieces_comes_out_whole_and_in_order() {
    use crate::agent::protocol::Splitter;
    use crate::audit::proptests::Rng;
    for seed in 1..=40u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let (mut cs, _, _, mut ao) = pair(key(9), key(9)).unwrap();
        // Up to 12 frames, from empty to past three chunks, of arbitrary bytes (newlines too).
        let frames: Vec<Vec<u8>> = (0..1 + rng.below(12))
            .map(|_| {
                let (tiny, any) = (rng.below(40), rng.below(3 * CHUNK + 7));
                let len = [0, tiny, tiny, CHUNK - 1, CHUNK, CHUNK + 1, any][rng.below(7)];
                (0..len).map(|_| rng.next() as u8).collect()
            })
            .collect();
        // The stream the agent reads: the opening line, then every frame sealed; and where each
        // message's length starts (the edges a read most likely splits badly).
        let mut stream = b"{\"channel\":2,\"noise\":\"x\"}\n".to_vec();
        let mut edges = vec![stream.len()];
        for f in &frames {
            let sealed = cs.seal(f);
            for m in messages(&sealed) {
                edges.push(edges.last().unwrap() + 2 + m.len());
            }
            stream.extend_from_slice(&sealed);
        }
        let mut s = Splitter::default();
        let (mut out, mut opened, mut at) = (Vec::new(), false, 0);
        while at < stream.len() {
            // Half the reads end next to an edge (one before it, on it, inside the length),
            // the others after 1 to 7 bytes or up to a full socket read.
            let next_edge = edges.iter().find(|&&e| e > at + 1).copied();
            let end = match (rng.below(4), next_edge) {
                (0 | 1, Some(e)) => e - 1 + rng.below(3),
                (2, _) => at + 1 + rng.below(7),
                _ => at + 1 + rng.below(70_000),
            };
            let end = end.clamp(at + 1, stream.len());
            s.push(&stream[at..end]);
            at = end;
            loop {
                if !opened {
                    match s.next_line().unwrap() {
                        Some(line) => {
                            assert!(line.starts_with(b"{\"channel\""), "seed {seed}");
                            opened = true;
                            continue;
                        }
                        None => break,
                    }
                }
                let Some(m) = s.next_sealed() else { break };
                if let Some(f) = ao.open(&m).unwrap() {
                    out.push(f.to_vec());
                }
            }
        }
        assert_eq!(out, frames, "seed {seed}: every frame, whole, in order");
        assert!(s.next_sealed().is_none(), "seed {seed}: nothing left over");
    }
}
