"""The client of benches/swap.rs: N GET requests over HTTPS, each on a new connection (as the
proxy answers `connection: close`), timed from connect to the last byte of the body; prints the
times in ms as JSON. `proxy`: through HTTPS_PROXY (a CONNECT tunnel) with the placeholder in
$API_TOKEN, trusting SSL_CERT_FILE (the sandbox's bundle). `direct`: to the target, trusting CA,
with TOKEN. Usage: swap_client.py proxy|direct PORT N [CA TOKEN]"""
import http.client
import json
import os
import ssl
import sys
import time

mode, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if mode == "proxy":
    ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    token = os.environ["API_TOKEN"]
    proxy = os.environ["HTTPS_PROXY"].rsplit("/", 1)[-1].split(":")
else:
    ctx = ssl.create_default_context(cafile=sys.argv[4])
    token = sys.argv[5]
times = []
for i in range(n):
    t = time.perf_counter()
    if mode == "proxy":
        c = http.client.HTTPSConnection(proxy[0], int(proxy[1]), context=ctx)
        c.set_tunnel("127.0.0.1", port)
    else:
        c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx)
    c.request("GET", f"/{mode}?t={mode}{i}", headers={"Authorization": f"Bearer {token}"})
    r = c.getresponse()
    body = r.read()
    c.close()
    assert r.status == 200 and body == b'{"ok":true}', (r.status, body)
    times.append((time.perf_counter() - t) * 1000)
print(json.dumps(times))
