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
  /forms?kind=K    200 text echoing the credential it received (K: bearer, basic, header, query)
                   in every form (raw, base64 at three alignments standard and URL-safe, percent
                   upper/lower/mixed/partial, form-encoded, JSON \\u-escaped, Go-escaped, hex), in
                   the body and in the X-Request-Id, ETag, Link, Location and Cache-Control headers
  /forms.json?kind=K  the same as a JSON document (so that decoding its escapes spells it out)
  /cut?kind=K      a body that ends in the middle of the received credential
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


def received_secret(handler, kind, query):
    """The credential as this request carried it, or "" if it did not."""
    auth = handler.headers.get("Authorization", "")
    if kind == "bearer" and auth.startswith("Bearer "):
        return auth[len("Bearer "):]
    if kind == "basic" and auth.startswith("Basic "):
        return base64.b64decode(auth[len("Basic "):]).decode().split(":", 1)[1]
    if kind == "header":
        v = handler.headers.get("X-Api-Key", "")
        return v[len("Token "):] if v.startswith("Token ") else ""
    if kind == "query":
        return query.get("api_key", [""])[0]
    return ""


def forms_of(s):
    """Every form of `s` a careless or hostile target could echo."""
    b = s.encode()
    out = [("raw", s)]
    for prefix in [b"", b"B", b"Be", b"Bearer ", b"user:"]:
        for name, enc in [("std", base64.b64encode), ("url", base64.urlsafe_b64encode)]:
            e = enc(prefix + b).decode()
            out.append(("b64-%s-%d" % (name, len(prefix)), e))
            out.append(("b64-%s-%d-nopad" % (name, len(prefix)), e.rstrip("=")))
    out.append(("pct-upper", "".join("%%%02X" % c for c in b)))
    out.append(("pct-lower", "".join("%%%02x" % c for c in b)))
    out.append(("pct-mixed", "".join(("%%%02X" if i % 2 else "%%%02x") % c for i, c in enumerate(b))))
    out.append(("pct-partial", urllib.parse.quote(s, safe="")))
    out.append(("form", urllib.parse.quote_plus(s)))
    out.append(("json-u", "".join("\\u%04x" % ord(c) for c in s)))
    out.append(("json-U", "".join("\\u%04X" % ord(c) for c in s)))
    go = json.dumps(s)[1:-1].replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    out.append(("json-go", go))
    out.append(("hex", b.hex()))
    out.append(("HEX", b.hex().upper()))
    return out


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
        if url.path in ("/forms", "/forms.json", "/cut"):
            secret = received_secret(self, q.get("kind", [""])[0], q)
            if not secret:
                return self._send(400, b'{"error":"no credential received"}')
            forms = forms_of(secret)
            headers = {
                "X-Request-Id": secret,
                "ETag": '"%s"' % dict(forms)["b64-std-7"],
                "Link": "<https://x/?t=%s>; rel=next" % dict(forms)["pct-mixed"],
                "Location": "/x?t=" + dict(forms)["form"] + "&h=" + dict(forms)["hex"],
                "Cache-Control": "private, tag=" + dict(forms)["b64-url-2-nopad"],
            }
            if url.path == "/cut":
                return self._send(200, b'{"token": "' + secret.encode()[: len(secret) // 2], "text/plain")
            if url.path == "/forms.json":
                doc = {name: value for name, value in forms}
                # A string whose escapes, once decoded, are the secret itself.
                text = json.dumps(doc).replace(json.dumps(secret), '"' + dict(forms)["json-u"] + '"')
                return self._send(200, text.encode(), "application/json", headers)
            text = "\n".join("%s: %s" % (name, value) for name, value in forms)
            return self._send(200, text.encode(), "text/plain", headers)
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
