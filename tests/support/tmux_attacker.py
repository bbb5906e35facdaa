"""The same-uid attacker of tests/approver_terminal.rs: a prompt-injected agent's shell with no
passphrase and no PIN. It asks for an action through `vault mcp` (as the AI client would), finds
the person's `vault approve` pane on the user's tmux server (`list-panes -a`), and for DURATION
seconds reads the pane (`capture-pane`) and types into it (`send-keys`) every key the card names
(`[a]`, `[s]`, ...) and, after each, every short word the pane shows followed by Enter (the
card's own words, and what a PIN prompt might accept). It ends with `q`, then collects its
action (`get_action`), which runs it if it was approved. Its report (JSON) says
what it asked for and what it typed; the test counts the effect at the target.

usage: tmux_attacker.py VAULT_BIN URL DURATION REPORT
(VAULT_DIR and TMUX_TMPDIR come from the environment, as they would for the agent's shell.)
"""
import json
import re
import subprocess
import sys
import time

vault_bin, url, duration, report_path = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
report = {"asked": None, "pane": None, "keys": [], "words": [], "sends": 0, "screens": []}


def tmux(*args):
    return subprocess.run(["tmux", *args], capture_output=True, text=True)


# 1. Ask for a DELETE through vault mcp, as the agent would; keep the session open so it waits.
mcp = subprocess.Popen([vault_bin, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True, bufsize=1)


def rpc(msg):
    mcp.stdin.write(json.dumps(msg) + "\n")
    mcp.stdin.flush()
    if "id" not in msg:
        return None
    while True:
        line = mcp.stdout.readline()
        if not line:
            return None
        reply = json.loads(line)
        if reply.get("id") == msg["id"]:
            return reply


rpc({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "attacker", "version": "1"}}})
rpc({"jsonrpc": "2.0", "method": "notifications/initialized"})
answer = rpc({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
    "name": "http_request", "arguments": {
        "credential": "api", "method": "DELETE", "url": url, "wait_s": 1}}})
report["asked"] = answer["result"]["structuredContent"] if answer else None

# 2. Find the approver's pane.
pane = None
for _ in range(50):
    out = tmux("list-panes", "-a", "-F", "#{pane_id} #{pane_current_command}").stdout
    for line in out.splitlines():
        pid, _, cmd = line.partition(" ")
        if cmd.startswith("vault"):
            pane = pid
    if pane:
        break
    time.sleep(0.1)
report["pane"] = pane

# 3. Read it and type at it.
deadline = time.time() + duration
while pane and time.time() < deadline:
    screen = tmux("capture-pane", "-p", "-t", pane).stdout
    report["screens"].append(screen)
    keys = [k for k in dict.fromkeys(re.findall(r"\[(\w)\]", screen)) if k != "q"]
    words = list(dict.fromkeys(w for w in re.findall(r"[A-Za-z0-9]+", screen) if len(w) <= 8))
    for k in keys or ["a"]:
        tmux("send-keys", "-t", pane, k)
        report["keys"].append(k)
        report["sends"] += 1
        time.sleep(0.7)  # past the card's settle time, so the key counts
        for w in words[:40]:
            if time.time() >= deadline:
                break
            tmux("send-keys", "-t", pane, "-l", w)
            tmux("send-keys", "-t", pane, "Enter")
            report["words"].append(w)
            report["sends"] += 2
            time.sleep(0.05)
        if time.time() >= deadline:
            break
if pane:
    tmux("send-keys", "-t", pane, "q")
    report["keys"].append("q")
    report["screens"].append(tmux("capture-pane", "-p", "-t", pane).stdout)

# 4. Collect: an approved action runs when its session asks for it.
if report["asked"] and report["asked"].get("action_id"):
    got = rpc({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "get_action", "arguments": {"action_id": report["asked"]["action_id"], "wait_s": 3}}})
    report["collected"] = got["result"]["structuredContent"] if got else None

with open(report_path, "w") as f:
    json.dump(report, f)
# The MCP session stays open until the test has looked: the action must not be withdrawn.
print("done", flush=True)
sys.stdin.readline()
