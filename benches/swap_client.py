"""The client of benches/swap.rs: N GET requests over HTTPS, each on a new connection (as the
proxy answers `connection: close`), timed from connect to the last byte of the body; prints the
times in ms as JSON, and on stderr the median of each phase (connect, the CONNECT tunnel, the TLS
handshake, sending the request, the response). `proxy`: through HTTPS_PROXY (a CONNECT tunnel)
with the placeholder in $API_TOKEN, trusting SSL_CERT_FILE (the sandbox's bundle). `direct`: to
the target, trusting CA, with TOKEN. Each step is what `http.client`'s own `connect` does.
Usage: swap_client.py proxy|direct PORT N WARMUP [CA TOKEN]"""
import http.client
import json
import os
import socket
import ssl
import statistics
import sys
import time

mode, port, n, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if mode == "proxy":
    ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    token = os.environ["API_TOKEN"]
    proxy = os.environ["HTTPS_PROXY"].rsplit("/", 1)[-1].split(":")
    dial = (proxy[0], int(proxy[1]))
else:
    ctx = ssl.create_default_context(cafile=sys.argv[5])
    token = sys.argv[6]
    dial = ("127.0.0.1", port)
times, phases = [], []
for i in range(n):
    t = time.perf_counter()
    c = http.client.HTTPSConnection(*dial, context=ctx)
    if mode == "proxy":
        c.set_tunnel("127.0.0.1", port)
    sock = socket.create_connection(dial)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c.sock = sock
    t1 = time.perf_counter()
    if mode == "proxy":
        c._tunnel()
    t2 = time.perf_counter()
    c.sock = ctx.wrap_socket(sock, server_hostname="127.0.0.1")
    t3 = time.perf_counter()
    c.request("GET", f"/{mode}?t={mode}{i}", headers={"Authorization": f"Bearer {token}"})
    t4 = time.perf_counter()
    r = c.getresponse()
    body = r.read()
    t5 = time.perf_counter()
    c.close()
    assert r.status == 200 and body == b'{"ok":true}', (r.status, body)
    times.append((t5 - t) * 1000)
    phases.append([(b - a) * 1000 for a, b in zip((t, t1, t2, t3, t4), (t1, t2, t3, t4, t5))])
print(json.dumps(times))
medians = [round(statistics.median(p), 3) for p in zip(*phases[warmup:])]
print(f"phases {mode}: connect, tunnel, handshake, send, response (ms p50): {medians}", file=sys.stderr)
