//! Benchmark: what `vault run`'s proxy (`contain::egress`) costs a contained client's
//! connection, against a direct connection to the same loopback server in the same run: the
//! time to a usable connection (connect, for the proxy also `CONNECT` and its `200`, then one
//! byte echoed), and a download's throughput through a tunnel. The proxy runs here on a
//! listener of its own, as `vault run` runs it on the one its sandbox hands out: the sandbox's
//! namespace adds no step per connection (its loopback is a loopback).
//!
//! Run: `cargo bench --bench egress` (goals: CONNECT set-up adds at most 1 ms at p50; a tunnel
//! carries at least 0.9x the direct throughput, over 1 GiB). `-- --quick`: small sizes, checks only.
//! On loopback the direct download is bound by the CPU (a sender's and a receiver's work, one
//! core each on 2 cores); a tunnel is two TCP connections, so a third party shares those two
//! cores, and there it is bound well under 1x whatever the relay does. A second peer shows the
//! usual relay: a bare one (two threads copying through 128 KiB buffers), measured in the same
//! run; the tunnel splices through a pipe instead, so its bytes never come up into the proxy.
//! What it carries absolute (MB/s) is what a real link is compared with.
mod common;

use agent_vault::contain::egress::{self, Allow, Entry};
use common::{stats, Side};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// The upstream: `e` echoes one byte; `dN` sends N bytes and closes.
fn upstream() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = c.set_nodelay(true);
                let mut op = [0u8; 1];
                while c.read_exact(&mut op).is_ok() {
                    match op[0] {
                        b'e' => {
                            if c.write_all(b"e").is_err() {
                                return;
                            }
                        }
                        b'd' => {
                            let mut n = [0u8; 8];
                            if c.read_exact(&mut n).is_err() {
                                return;
                            }
                            let mut left = u64::from_le_bytes(n);
                            let chunk = vec![b'x'; 256 * 1024];
                            while left > 0 {
                                let k = left.min(chunk.len() as u64) as usize;
                                if c.write_all(&chunk[..k]).is_err() {
                                    return;
                                }
                                left -= k as u64;
                            }
                            return;
                        }
                        _ => return,
                    }
                }
            });
        }
    });
    port
}

fn proxy(allowed: u16) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let allow = Allow(vec![Entry::parse(&format!("127.0.0.1:{allowed}")).unwrap()]);
    std::thread::spawn(move || egress::serve_listener(l, allow, None, Default::default()));
    port
}

/// A bare relay to `up`: each connection copied both ways by two threads through 128 KiB
/// buffers, nothing else (what a relay written the usual way does).
fn bare_relay(up: u16) -> u16 {
    fn copy(mut from: TcpStream, mut to: TcpStream) {
        let mut buf = vec![0u8; 128 * 1024];
        while let Ok(n @ 1..) = from.read(&mut buf) {
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Write);
    }
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let u = TcpStream::connect(("127.0.0.1", up)).unwrap();
            let (c2, u2) = (c.try_clone().unwrap(), u.try_clone().unwrap());
            std::thread::spawn(move || copy(c, u));
            std::thread::spawn(move || copy(u2, c2));
        }
    });
    port
}

/// A connection to `up`, directly or through the proxy's tunnel.
fn open(up: u16, via: Option<u16>) -> TcpStream {
    match via {
        None => TcpStream::connect(("127.0.0.1", up)).unwrap(),
        Some(p) => {
            let mut s = TcpStream::connect(("127.0.0.1", p)).unwrap();
            write!(
                s,
                "CONNECT 127.0.0.1:{up} HTTP/1.1\r\nHost: 127.0.0.1:{up}\r\n\r\n"
            )
            .unwrap();
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                s.read_exact(&mut b).unwrap();
                head.push(b[0]);
            }
            assert!(
                head.starts_with(b"HTTP/1.1 200"),
                "{}",
                String::from_utf8_lossy(&head)
            );
            s
        }
    }
}

fn set_up(up: u16, via: Option<u16>) -> Duration {
    let t = Instant::now();
    let mut s = open(up, via);
    s.set_nodelay(true).unwrap();
    s.write_all(b"e").unwrap();
    let mut b = [0u8; 1];
    s.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"e");
    t.elapsed()
}

/// MB/s of a download of `bytes`: from `up` directly, through the proxy's tunnel (`via`), or
/// through the bare relay (`up` is then the relay's port).
fn download(up: u16, via: Option<u16>, bytes: u64) -> f64 {
    let mut s = open(up, via);
    let t = Instant::now();
    s.write_all(b"d").unwrap();
    s.write_all(&bytes.to_le_bytes()).unwrap();
    let mut buf = vec![0u8; 256 * 1024];
    let mut got = 0u64;
    loop {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got += n as u64;
    }
    assert_eq!(got, bytes, "the download ended short");
    bytes as f64 / 1e6 / t.elapsed().as_secs_f64()
}

fn main() {
    let quick = common::quick();
    let (n, bytes, rounds) = common::size(quick, (2000, 1u64 << 30, 3), (50, 64 << 20, 1));
    let up = upstream();
    let px = proxy(up);
    // Warm both paths, then alternate so both see the same machine.
    for _ in 0..20 {
        set_up(up, None);
        set_up(up, Some(px));
    }
    let (mut direct, mut tunnel) = (Vec::new(), Vec::new());
    for _ in 0..n {
        direct.push(set_up(up, None));
        tunnel.push(set_up(up, Some(px)));
    }
    let peer = "connection set-up, direct (peer)";
    common::emit_samples(peer, Side::Peer, &direct);
    common::emit_samples(
        "connection set-up, CONNECT through the proxy",
        Side::Vs(peer),
        &tunnel,
    );
    let (d50, d95, _) = stats(direct);
    let (t50, t95, _) = stats(tunnel);
    println!("set-up ms        p50      p95");
    println!("direct      {d50:>8.3} {d95:>8.3}");
    println!(
        "proxy       {t50:>8.3} {t95:>8.3}   (+{:.3} ms at p50)",
        t50 - d50
    );
    let added = t50 - d50;
    common::emit_goal(
        "CONNECT set-up adds <= 1 ms at p50",
        added,
        "ms",
        added <= 1.0,
    );

    let relay = bare_relay(up);
    let (mut dbest, mut tbest, mut rbest) = (0f64, 0f64, 0f64);
    for _ in 0..rounds {
        dbest = dbest.max(download(up, None, bytes));
        tbest = tbest.max(download(up, Some(px), bytes));
        rbest = rbest.max(download(relay, None, bytes));
    }
    let relay_peer = "download throughput, a bare relay (peer: a buffered copy, the usual relay)";
    for (peer, value, tunnel_row) in [
        (
            "download throughput, direct (peer)",
            dbest,
            "download throughput, through a tunnel",
        ),
        (
            relay_peer,
            rbest,
            "download throughput, through a tunnel (against the bare relay)",
        ),
    ] {
        common::emit_figure(peer, "MB/s", Side::Peer, value);
        common::emit_figure(tunnel_row, "MB/s", Side::Vs(peer), tbest);
    }
    let ratio = tbest / dbest;
    println!(
        "download of {} MiB, best of {rounds}: direct {dbest:.0} MB/s, tunnel {tbest:.0} MB/s ({ratio:.2}x), bare relay {rbest:.0} MB/s (tunnel {:.2}x of it)",
        bytes >> 20,
        tbest / rbest
    );
    common::emit_goal(
        "a tunnel carries >= 0.9x the direct throughput",
        ratio,
        "x",
        ratio >= 0.9,
    );
}
