"""An impostor on the agent's socket path (tests/custody.rs), a process of its own: records every
line it hears, answers hello as an agent would and anything else with ok, and hangs up after
`lock` as a stopping agent does. It would record any decision or signature it were sent.

usage: impostor.py SOCKET RECORD   (prints "listening" once bound; ends when killed)
"""
import json
import os
import socket
import sys
import threading

path, record = sys.argv[1], sys.argv[2]
try:
    os.unlink(path)
except FileNotFoundError:
    pass
srv = socket.socket(socket.AF_UNIX)
srv.bind(path)
srv.listen(16)
print("listening", flush=True)
lock = threading.Lock()


def serve(conn):
    with conn, conn.makefile("rb") as lines:
        for raw in lines:
            with lock, open(record, "ab") as fh:
                fh.write(raw if raw.endswith(b"\n") else raw + b"\n")
            try:
                v = json.loads(raw)
            except ValueError:
                v = {}
            req = v.get("req") or {}
            rid = v.get("id", 0)
            if req.get("op") == "hello":
                reply = {"t": "reply", "id": rid, "reply": {"kind": "welcome", "data": {
                    "v": 1, "vault_id": "vlt_x", "pid": 1, "session": None, "secure": False}}}
            else:
                reply = {"t": "reply", "id": rid, "reply": {"kind": "ok"}}
            try:
                conn.sendall(json.dumps(reply).encode() + b"\n")
            except OSError:
                return
            if req.get("op") == "lock":
                return


while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
