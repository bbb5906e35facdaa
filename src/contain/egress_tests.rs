use super::*;

fn entry(s: &str) -> Entry {
    Entry::parse(s).unwrap()
}

#[test]
fn entries_name_a_host_a_port_or_a_domain_and_nothing_looser() {
    assert_eq!(
        entry("Registry.NPMJS.org"),
        Entry {
            host: "registry.npmjs.org".into(),
            port: None
        }
    );
    assert_eq!(entry("127.0.0.1:8080").port, Some(8080));
    assert_eq!(entry("[::1]:443").host, "::1");
    for bad in [
        "",
        "*",
        "*.",
        "a*.b",
        "http://x.org",
        "user@x.org",
        "x.org:99999",
        "::1",
        "a b",
    ] {
        assert!(Entry::parse(bad).is_err(), "{bad:?} was taken");
    }
    let allow = Allow(vec![entry("*.npmjs.org"), entry("api.example.com:443")]);
    assert!(allow.find("registry.npmjs.org", 443).is_some());
    assert!(allow.find("a.b.npmjs.org", 80).is_some());
    // The domain itself, a name that only ends the same way, and another port: no.
    assert!(allow.find("npmjs.org", 443).is_none());
    assert!(allow.find("evilnpmjs.org", 443).is_none());
    assert!(allow.find("api.example.com", 80).is_none());
    assert!(allow.find("api.example.com.evil.net", 443).is_none());
}

#[test]
fn a_request_is_a_tunnel_or_an_absolute_http_request_and_nothing_else() {
    assert_eq!(
        parse(b"CONNECT api.Example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n"),
        Ok(Ask::Tunnel {
            host: "api.example.com".into(),
            port: 443
        })
    );
    assert_eq!(
        parse(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n"),
        Ok(Ask::Tunnel {
            host: "::1".into(),
            port: 8443
        })
    );
    let Ok(Ask::Forward { host, port, head }) = parse(
        b"GET http://127.0.0.1:9000/a/b?c=1 HTTP/1.1\r\nHost: 127.0.0.1:9000\r\nProxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n",
    ) else {
        panic!("not forwarded")
    };
    assert_eq!((host.as_str(), port), ("127.0.0.1", 9000));
    assert_eq!(
        String::from_utf8(head).unwrap(),
        "GET /a/b?c=1 HTTP/1.1\r\nHost: 127.0.0.1:9000\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    // A header value's bytes pass as sent, UTF-8 or not.
    let Ok(Ask::Forward { head, .. }) =
        parse(b"GET http://h.example/ HTTP/1.1\r\nX-Raw: caf\xe9\r\n\r\n")
    else {
        panic!("not forwarded")
    };
    assert!(head.windows(11).any(|w| w == b"X-Raw: caf\xe9"), "{head:?}");
    for bad in [
        &b"GET /relative HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"GET https://x.org/ HTTP/1.1\r\n\r\n",
        b"CONNECT x.org HTTP/1.1\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
    ] {
        assert!(
            parse(bad).is_err(),
            "{:?} was taken",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn the_clients_model_hosts_and_its_named_endpoint_pass_and_nothing_else_by_default() {
    let claude = super::super::clients::CLIENTS
        .iter()
        .find(|c| c.program == "claude")
        .unwrap();
    let env: Vec<(OsString, OsString)> = vec![
        (
            "ANTHROPIC_BASE_URL".into(),
            "http://127.0.0.1:4141/v1".into(),
        ),
        ("OTHER_URL".into(), "http://10.0.0.1:80/".into()),
    ];
    let allow = allow_for(Some(claude), &env, &[entry("*.npmjs.org")]);
    assert!(allow.find("api.anthropic.com", 443).is_some());
    assert!(allow.find("127.0.0.1", 4141).is_some());
    assert!(allow.find("registry.npmjs.org", 443).is_some());
    assert!(allow.find("10.0.0.1", 80).is_none());
    assert!(allow.find("api.anthropic.com", 80).is_none());
    // A program `vault run` does not know gets only what is named.
    assert_eq!(allow_for(None, &env, &[]), Allow::default());
    let mut vars: Vec<(OsString, OsString)> = vec![
        ("NO_PROXY".into(), "localhost".into()),
        ("PATH".into(), "/bin".into()),
    ];
    set_env(&mut vars);
    let get = |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(get("NO_PROXY"), Some("".into()));
    assert_eq!(
        get("https_proxy"),
        Some(format!("http://127.0.0.1:{PORT}").into())
    );
    assert_eq!(get("PATH"), Some("/bin".into()));
}

/// A connected pair of loopback TCP sockets: (the one that connected, the one accepted).
fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    (a, l.accept().unwrap().0)
}

fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut rng = crate::audit::proptests::Rng(seed);
    (0..n).map(|_| rng.next() as u8).collect()
}

#[test]
fn a_tunnel_carries_every_byte_both_ways_and_passes_each_half_close_on() {
    // client <-> (tunnel) <-> upstream: 3 MB up, more than the first pipe holds at once; 9 MB
    // down, past `BULK_AFTER`, so the pipe grows on the way.
    let (mut client, inside) = tcp_pair();
    let (outside, mut upstream) = tcp_pair();
    let (up, down) = (noise(3_000_000, 7), noise(9_000_001, 9));
    let tunnel = std::thread::spawn(move || splice(inside, outside));
    let (u2, d2) = (up.clone(), down.clone());
    let far = std::thread::spawn(move || {
        let mut got = Vec::new();
        upstream.read_to_end(&mut got).unwrap();
        // The client's half-close arrived; the other direction still flows.
        upstream.write_all(&d2).unwrap();
        drop(upstream);
        got
    });
    client.write_all(&u2).unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    let mut back = Vec::new();
    client.read_to_end(&mut back).unwrap();
    assert!(
        far.join().unwrap() == up,
        "the upstream got the client's bytes, in order"
    );
    assert!(
        back == down,
        "the client got the upstream's bytes, in order"
    );
    assert_eq!(tunnel.join().unwrap(), (3_000_000, 9_000_001));
}

#[test]
fn the_buffered_copy_counts_on_from_where_the_pipe_stopped() {
    let (mut a, from) = tcp_pair();
    let (to, mut b) = tcp_pair();
    let data = noise(300_000, 3);
    let d2 = data.clone();
    let writer = std::thread::spawn(move || {
        a.write_all(&d2).unwrap();
    });
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        b.read_to_end(&mut got).unwrap();
        got
    });
    let total = copied(&from, &to, 5);
    writer.join().unwrap();
    to.shutdown(Shutdown::Write).unwrap();
    assert_eq!(total, 300_005);
    assert!(reader.join().unwrap() == data);
}
