"""A git smart-HTTP server over TLS on loopback: `git http-backend` behind Python's HTTPS
server, for tests/placeholders.rs. Usage: git_http.py ROOT CERT KEY LOG. It serves the
repositories under ROOT, prints its port on stdout, and appends one JSON line per request to LOG
(method, path, the Authorization header as received) before it answers: the test counts at the
target. A request without an Authorization header gets 401 (as GitHub answers a private repo)."""
import http.server
import json
import os
import ssl
import subprocess
import sys

ROOT, CERT, KEY, LOG = sys.argv[1:5]
BACKEND = subprocess.run(["git", "--exec-path"], capture_output=True, text=True).stdout.strip()
BACKEND = os.path.join(BACKEND, "git-http-backend")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle_one(self, method):
        auth = self.headers.get("Authorization")
        with open(LOG, "a") as f:
            f.write(json.dumps({"method": method, "path": self.path, "authorization": auth}) + "\n")
        if not auth:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path, _, query = self.path.partition("?")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": ROOT,
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": "tester",
        }
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        out = subprocess.run([BACKEND], input=body, capture_output=True, env=env).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self):
        self.handle_one("GET")

    def do_POST(self):
        self.handle_one("POST")


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(CERT, KEY)
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
