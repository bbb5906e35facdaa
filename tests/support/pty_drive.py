#!/usr/bin/env python3
"""Run a command in a real pseudo-terminal and answer its prompts.

usage: pty_drive.py SCRIPT_JSON -- COMMAND [ARGS...]
SCRIPT_JSON is a list of [expect, send] or [expect, send, delay_s] steps: wait until `expect`
appears in the output (case-insensitive) after where the previous step's `expect` was found, wait
`delay_s` (default 0.2 s, as a person would), then type `send`. An empty `expect` matches at once,
so ["", "a", 0.05] types "a" 50 ms after the previous step. An `expect` that starts with "re:"
is a regular expression instead, and "$1" in a later `send` stands for its first group (what
the command printed, e.g. a PIN it chose). The transcript goes to stdout; the exit status is the
child's.
"""
import fcntl
import json
import os
import pty
import re
import select
import struct
import sys
import termios
import time

def main():
    sep = sys.argv.index("--")
    script = json.loads(sys.argv[1])
    argv = sys.argv[sep + 1 :]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(argv[0], argv)
    # A terminal of 40 rows and 120 columns (or PTY_SIZE="ROWSxCOLS"), so paged output pages the
    # same way on every machine.
    rows, cols = (int(n) for n in os.environ.get("PTY_SIZE", "40x120").split("x"))
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    out = b""
    deadline = time.time() + 60
    step = 0
    seen_upto = 0
    group = ""
    while True:
        if step < len(script):
            expect = script[step][0]
            if expect.startswith("re:"):
                m = re.compile(expect[3:].encode()).search(out, seen_upto)
                at, end = (m.start(), m.end()) if m else (-1, -1)
                if m and m.groups():
                    group = m.group(1).decode()
            else:
                want = expect.lower().encode()
                at = out.lower().find(want, seen_upto)
                end = at + len(want)
            if at >= 0:
                # A prompt is printed before echo is turned off; answer after it settled, as a
                # person would, so the answer is never echoed into the transcript.
                delay = script[step][2] if len(script[step]) > 2 else 0.2
                time.sleep(delay)
                os.write(fd, script[step][1].replace("$1", group).encode())
                seen_upto = end
                step += 1
                continue
        if time.time() > deadline:
            sys.stdout.write(out.decode(errors="replace"))
            sys.stdout.write("\n[pty_drive.py: timed out waiting for %r]\n" % (script[step][0] if step < len(script) else "exit"))
            os.kill(pid, 9)
            sys.exit(124)
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                data = os.read(fd, 4096)
            except OSError:
                data = b""
            if not data:
                break
            out += data
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(out.decode(errors="replace"))
    sys.exit(os.waitstatus_to_exitcode(status))

main()
