#!/usr/bin/env python3
"""A real loopback HTTP target that records every request it receives.

usage: http_target.py RECORD_FILE [SECRET [CERT_PEM KEY_PEM]]
Prints "PORT <n>" on stdout once listening on 127.0.0.1; with CERT_PEM and KEY_PEM it speaks
HTTPS only (a failed handshake is dropped before any request is read, so it records nothing). Each request is appended to RECORD_FILE
as one JSON line: time, method, path, headers, body (base64). Routes:
  /echo            200 JSON echoing the request's headers, query and body
  /leak            200 text echoing SECRET raw, base64, URL-encoded (body and X-Echo header)
  /status/NNN      that status
  /redirect?to=URL 302 to URL
  /big?mb=N        N MiB of text, streamed
  /slow?s=N        answers after N seconds
  anything else    200 {"ok": true, "path": ...}
"""
import base64
import json
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RECORD = sys.argv[1]
SECRET = sys.argv[2] if len(sys.argv) > 2 else ""
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _record(self, body):
        entry = {
            "t": time.time(),
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body_b64": base64.b64encode(body).decode(),
        }
        with LOCK, open(RECORD, "a") as f:
            f.write(json.dumps(entry) + "\n")

    def _send(self, status, body, ctype="application/json", extra=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Set-Cookie", "session=should-never-reach-the-agent")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        self._record(body)
        url = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(url.query)
        if url.path == "/echo":
            out = {"headers": {k.lower(): v for k, v in self.headers.items()}, "query": q, "body": body.decode(errors="replace")}
            return self._send(200, json.dumps(out).encode())
        if url.path == "/leak":
            s = SECRET.encode()
            forms = [s, base64.b64encode(s), base64.urlsafe_b64encode(s).rstrip(b"="), urllib.parse.quote(SECRET, safe="").encode()]
            text = b"here it is: " + b" | ".join(forms) + b" \x1b[31mred\x1b[0m"
            return self._send(200, text, "text/plain", {"X-Echo": forms[0].decode(), "Location": "/x?t=" + forms[3].decode()})
        if url.path.startswith("/status/"):
            return self._send(int(url.path.split("/")[2]), b'{"status":"set"}')
        if url.path == "/redirect":
            return self._send(302, b"", "text/plain", {"Location": q.get("to", ["/"])[0]})
        if url.path == "/big":
            mb = int(q.get("mb", ["1"])[0])
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(mb * 1024 * 1024))
            self.end_headers()
            chunk = b"x" * 1024 * 1024
            for _ in range(mb):
                self.wfile.write(chunk)
            return
        if url.path == "/slow":
            time.sleep(float(q.get("s", ["1"])[0]))
        self._send(200, json.dumps({"ok": True, "path": url.path}).encode())

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = handle_any


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
if len(sys.argv) > 4:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[3], sys.argv[4])
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
print("PORT", server.server_address[1], flush=True)
server.serve_forever()
