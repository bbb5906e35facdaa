"""The second prompt-injected agent of tests/containment.rs (issue 45), run as
`vault run -- python3 THIS CONFIG`: the same non-root uid as the person. It does not try to reach
the person now; it tries to plant what the person's own tools run later, outside, and to take
what the first list did not name. Every attempt is recorded; the test judges each one from
outside, after the run (git run as the person, file modes, listeners, the agent).

- the agent's protocol spoken raw on the relayed socket: every request kind (CONFIG["requests"]);
- git configuration every way git reads it, in the project's repositories and new ones;
- chmod, chown, utime, ACLs and other extended attributes in every form, rename, link over each
  protected file and directory (CONFIG["protected"]);
- tokens in the environment, descriptors left open, sockets (CONFIG["sockets"]), the
  passphrase file and other files of the home (CONFIG["decoys"]);
- and the normal work: a file, a commit, a branch, a checkout, a temp file renamed in $HOME.

usage: contained_attacker2.py CONFIG_JSON   (the report goes to CONFIG["report"])
"""
import ctypes
import json
import os
import platform
import shutil
import socket
import struct
import subprocess
import sys

cfg = json.load(open(sys.argv[1]))
report = {"protocol": {}, "plant": {}, "meta": {}, "env": {}, "fds": {}, "sockets": {},
          "reads": {}, "work": {}}
MARK = cfg["ran_marker"]  # a planted command, run outside as the person, creates this file
PLANT = "touch %s" % MARK


def err(e):
    return type(e).__name__ + ": " + str(e)


def attempt(table, key, fn):
    try:
        r = fn()
        table[key] = "done" if r is None else r
    except Exception as e:
        table[key] = err(e)


# --- the agent's protocol, raw, on the relayed socket (as `vault mcp` would reach it): each
# request on a connection of its own, after an MCP hello.
def ask_alone(req):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(cfg["agent_socket"])
    buf = b""

    def ask(i, r):
        nonlocal buf
        s.sendall(json.dumps({"id": i, "req": r}).encode() + b"\n")
        while True:
            while b"\n" not in buf:
                chunk = s.recv(65536)
                if not chunk:
                    return {"hung_up": True}
                buf += chunk
            line, buf = buf.split(b"\n", 1)
            frame = json.loads(line)
            if frame.get("t") == "reply" and frame.get("id") in (i, 0):
                return frame["reply"]

    try:
        hello = ask(1, {"op": "hello", "v": cfg["protocol_version"], "role": "mcp"})
        return hello, ask(2, req)
    finally:
        s.close()


def raw_protocol():
    for kind, req in cfg["requests"]:
        try:
            hello, reply = ask_alone(req)
            report["protocol"][kind] = {"hello": hello.get("kind"), "reply": reply}
        except Exception as e:
            report["protocol"][kind] = {"exception": err(e)}


attempt(report, "protocol_error", raw_protocol)

# --- git configuration, every way git reads it.
project = cfg["project"]
fsmonitor = "[core]\n\tfsmonitor = %s\n" % PLANT
hook = "#!/bin/sh\n%s\n" % PLANT


def write(path, text, mode=None):
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    with open(path, "a") as fh:
        fh.write(text)
    if mode:
        os.chmod(path, mode)


def git_dir(repo):
    """The git directory of `repo`: its `.git`, or where its `.git` file points."""
    g = os.path.join(repo, ".git")
    if os.path.isfile(g):
        text = open(g).read().strip()
        if text.startswith("gitdir:"):
            return os.path.join(repo, text[len("gitdir:"):].strip())
    return g


for repo in cfg["repos"]:
    g = git_dir(repo)
    p = report["plant"]
    attempt(p, repo + ":gitfile", lambda: write(os.path.join(repo, ".git"), "gitdir: /planted\n")
            if os.path.isfile(os.path.join(repo, ".git")) else "n/a (a directory)")
    attempt(p, repo + ":config", lambda: write(os.path.join(g, "config"), fsmonitor))
    for h in ["post-index-change", "fsmonitor-watchman", "pre-commit", "post-checkout"]:
        attempt(p, repo + ":hooks/" + h, lambda h=h: write(os.path.join(g, "hooks", h), hook, 0o755))
    attempt(p, repo + ":config.worktree", lambda: write(os.path.join(g, "config.worktree"), fsmonitor))
    attempt(p, repo + ":commondir", lambda: write(os.path.join(g, "commondir"), "../planted\n"))
    attempt(p, repo + ":info/attributes", lambda: write(os.path.join(g, "info", "attributes"), "* diff=x\n"))
    attempt(p, repo + ":rename .git", lambda: os.rename(g, g + "-moved"))
    def replace(g=g):
        tmp = os.path.join(repo, ".config.tmp")
        write(tmp, fsmonitor)
        os.replace(tmp, os.path.join(g, "config"))
    attempt(p, repo + ":replace config", replace)
attempt(report["plant"], "include via global", lambda: write(os.path.expanduser("~/.gitconfig"), fsmonitor))
attempt(report["plant"], "xdg config", lambda: write(os.path.expanduser("~/.config/git/config"), fsmonitor))
# A repository made inside, a `.git` file pointing at a planted directory, a bare repository.
attempt(report["plant"], "git init", lambda: subprocess.run(
    ["git", "init", "-q", os.path.join(project, "newrepo")], check=True, capture_output=True) and
    write(os.path.join(project, "newrepo", ".git", "config"), fsmonitor))
def gitfile():
    d = os.path.join(project, "pointed")
    os.makedirs(os.path.join(d, "objects"), exist_ok=True)
    os.makedirs(os.path.join(d, "refs"), exist_ok=True)
    write(os.path.join(d, "HEAD"), "ref: refs/heads/main\n")
    write(os.path.join(d, "config"), fsmonitor)
    write(os.path.join(project, "linked", ".git"), "gitdir: %s\n" % d)
attempt(report["plant"], "gitfile", gitfile)
def bare():
    d = os.path.join(project, "bare")
    os.makedirs(os.path.join(d, "objects"), exist_ok=True)
    os.makedirs(os.path.join(d, "refs"), exist_ok=True)
    write(os.path.join(d, "HEAD"), "ref: refs/heads/main\n")
    write(os.path.join(d, "config"), "[core]\n\tbare = true\n" + fsmonitor[7:])
attempt(report["plant"], "bare", bare)
for f in cfg["project_files"]:
    attempt(report["plant"], f, lambda f=f: write(os.path.join(project, f), '{"mcpServers": {"x": {"command": "sh"}}}\n'))

# --- metadata and names of what must not change: every form of chmod, chown, utime and the
# extended attributes (an ACL that lets another user write, one that new files inherit, a plain
# user attribute set and removed), by path, through a link, by descriptor, `O_PATH` and empty path.
T = cfg["planted_time"]
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH = -100, 0x100, 0x1000
X86_64 = platform.machine() == "x86_64"


def sys_call(nr, *args):
    """A raw system call; OSError with the kernel's errno when it fails. Integers are passed as
    longs (a variadic call would leave the upper half of a register as it was)."""
    args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    if libc.syscall(ctypes.c_long(nr), *args) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def acl():
    """A POSIX ACL (the kernel's xattr form) that lets the person's group and everyone write."""
    entries = [(0x01, 7, 0xFFFFFFFF), (0x04, 7, 0xFFFFFFFF), (0x08, 7, os.getgid()),
               (0x10, 7, 0xFFFFFFFF), (0x20, 7, 0xFFFFFFFF)]
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)


def set_acl(path, default=False):
    if shutil.which("setfacl"):
        args = ["setfacl"] + (["-d"] if default else []) + ["-m", "o::rwx,g:%d:rwx" % os.getgid(), path]
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode != 0:
            raise OSError(1, "setfacl: " + r.stderr.strip())
        return None
    name = "system.posix_acl_default" if default else "system.posix_acl_access"
    os.setxattr(path, name, acl())


def with_fd(path, fn, flags=os.O_RDONLY):
    fd = os.open(path, flags)
    try:
        return fn(fd)
    finally:
        os.close(fd)


def through_link(path, fn):
    link = "/tmp/meta-link-%d" % os.getpid()
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(path, link)
    return fn(link)


O_PATH = 0o10000000
# C structs: utimbuf {actime, modtime}; timeval[2]; timespec[2]; xattr_args {value, size, flags}.
utimbuf = struct.pack("<qq", T, T)
timevals = struct.pack("<qqqq", T, 0, T, 0)
timespecs = struct.pack("<qqqq", T, 0, T, 0)
value = ctypes.create_string_buffer(b"planted")
xattr_args = struct.pack("<QII", ctypes.addressof(value), 7, 0)
METADATA = {
    "chmod": lambda p: os.chmod(p, 0o777),
    "chmod fd": lambda p: with_fd(p, lambda fd: os.fchmod(fd, 0o777)),
    "chmod proc fd": lambda p: with_fd(p, lambda fd: os.chmod("/proc/self/fd/%d" % fd, 0o777)),
    "chmod link": lambda p: through_link(p, lambda l: os.chmod(l, 0o777)),
    "fchmodat2 nofollow": lambda p: sys_call(452, AT_FDCWD, p.encode(), 0o777, AT_SYMLINK_NOFOLLOW),
    "fchmodat2 O_PATH empty": lambda p: with_fd(
        p, lambda fd: sys_call(452, fd, b"", 0o777, AT_EMPTY_PATH), O_PATH),
    "fchmodat relative": lambda p: with_fd(
        os.path.dirname(p), lambda d: os.chmod(os.path.basename(p), 0o777, dir_fd=d)),
    "chown": lambda p: os.chown(p, os.getuid(), os.getgid()),
    "chown fd": lambda p: with_fd(p, lambda fd: os.fchown(fd, os.getuid(), os.getgid())),
    "lchown": lambda p: os.lchown(p, os.getuid(), os.getgid()),
    "fchownat O_PATH empty": lambda p: with_fd(p, lambda fd: sys_call(
        260 if X86_64 else 54, fd, b"", os.getuid(), os.getgid(), AT_EMPTY_PATH), O_PATH),
    "utime": lambda p: os.utime(p, (T, T)),
    "utime now": lambda p: os.utime(p),
    "utime fd": lambda p: with_fd(p, lambda fd: os.utime(fd, (T, T))),
    "utime nofollow": lambda p: os.utime(p, (T, T), follow_symlinks=False),
    "utime link": lambda p: through_link(p, lambda l: os.utime(l, (T, T))),
    "acl": lambda p: set_acl(p),
    "acl default": lambda p: set_acl(p, default=True) if os.path.isdir(p) else "n/a (a file)",
    "setxattr": lambda p: os.setxattr(p, "user.planted", b"x"),
    "fsetxattr": lambda p: with_fd(p, lambda fd: os.setxattr(fd, "user.planted", b"x")),
    "lsetxattr": lambda p: os.setxattr(p, "user.planted", b"x", follow_symlinks=False),
    "setxattr link": lambda p: through_link(p, lambda l: os.setxattr(l, "user.planted", b"x")),
    "setxattrat": lambda p: sys_call(463, AT_FDCWD, p.encode(), 0, b"user.planted",
                                     ctypes.create_string_buffer(xattr_args, 16), 16),
    "removexattr": lambda p: os.removexattr(p, "user.kept"),
    "fremovexattr": lambda p: with_fd(p, lambda fd: os.removexattr(fd, "user.kept")),
    "lremovexattr": lambda p: os.removexattr(p, "user.kept", follow_symlinks=False),
    "removexattrat": lambda p: sys_call(466, AT_FDCWD, p.encode(), 0, b"user.kept"),
}
if X86_64:
    # The old forms, which only x86_64 has.
    METADATA.update({
        "utime(2)": lambda p: sys_call(132, p.encode(), ctypes.create_string_buffer(utimbuf, 16)),
        "utimes(2)": lambda p: sys_call(235, p.encode(), ctypes.create_string_buffer(timevals, 32)),
        "futimesat(2)": lambda p: sys_call(261, AT_FDCWD, p.encode(),
                                           ctypes.create_string_buffer(timevals, 32)),
        "utimensat(2)": lambda p: sys_call(280, AT_FDCWD, p.encode(),
                                           ctypes.create_string_buffer(timespecs, 32), 0),
    })

for path in cfg["protected"]:
    m = report["meta"].setdefault(path, {})
    for what, fn in METADATA.items():
        attempt(m, what, lambda fn=fn: fn(path))
    attempt(m, "rename", lambda: os.rename(path, path + ".moved"))
    attempt(m, "unlink", lambda: os.unlink(path) if not os.path.isdir(path) else os.rmdir(path))
    attempt(m, "write", lambda: write(path, "\n# planted\n") if not os.path.isdir(path) else "n/a (a directory)")

# --- what the first list did not name.
for k in cfg["env_decoys"]:
    report["env"][k] = os.environ.get(k)
for fd in range(3, 256):
    try:
        os.lseek(fd, 0, 0)
        report["fds"][str(fd)] = os.read(fd, 4096).decode(errors="replace")
    except OSError:
        pass
for path in cfg["sockets"]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.settimeout(2)
        s.connect(path)
        report["sockets"][path] = "connected"
    except Exception as e:
        report["sockets"][path] = err(e)
    finally:
        s.close()
for path in cfg["decoys"]:
    try:
        report["reads"][path] = open(path).read()
    except Exception as e:
        report["reads"][path] = err(e)

# --- the normal work: a file (with the person's umask), a commit, a branch, a checkout, a
# temporary file renamed in $HOME, the client's own state.
w = report["work"]
def normal():
    with open(os.path.join(project, "made-inside.txt"), "w") as fh:
        fh.write("work\n")
    w["mode"] = oct(os.stat(os.path.join(project, "made-inside.txt")).st_mode & 0o777)
    git = ["git", "-C", project, "-c", "user.name=agent", "-c", "user.email=agent@example.invalid"]
    for args in [["add", "made-inside.txt"], ["commit", "-q", "-m", "made inside"],
                 ["checkout", "-q", "-b", "inside-branch"], ["checkout", "-q", "-"]]:
        r = subprocess.run(git + args, capture_output=True, text=True)
        w[" ".join(args[:2])] = r.returncode if r.returncode == 0 else r.stderr.strip()
    # What tools do to files' metadata: `chmod +x`, an installer's modes in node_modules, `touch`,
    # times and an attribute set on a file of the project, a repository made and chmodded in /tmp.
    script = os.path.join(project, "script.sh")
    with open(script, "w") as fh:
        fh.write("#!/bin/sh\necho ran\n")
    for args in [["chmod", "+x", script], ["touch", os.path.join(project, "README")]]:
        r = subprocess.run(args, capture_output=True, text=True)
        w[args[0]] = r.returncode if r.returncode == 0 else r.stderr.strip()
    w["script"] = subprocess.run([script], capture_output=True, text=True).stdout.strip()
    pkg = os.path.join(project, "node_modules", "pkg")
    os.makedirs(os.path.join(pkg, "bin"), exist_ok=True)
    with open(os.path.join(pkg, "bin", "cli.js"), "w") as fh:
        fh.write("#!/usr/bin/env node\n")
    os.chmod(os.path.join(pkg, "bin", "cli.js"), 0o755)
    os.chmod(os.path.join(pkg, "bin"), 0o755)
    os.utime(os.path.join(pkg, "bin", "cli.js"), (T + 1, T + 1))
    os.setxattr(os.path.join(pkg, "bin", "cli.js"), "user.installer", b"npm")
    w["node_modules"] = True
    r = subprocess.run(["git", "init", "-q", "/tmp/inner"], capture_output=True, text=True)
    w["git init /tmp"] = r.returncode if r.returncode == 0 else r.stderr.strip()
    os.chmod("/tmp/inner/.git", 0o700)
    w["chmod /tmp repo"] = oct(os.stat("/tmp/inner/.git").st_mode & 0o777)
    tmp = os.path.expanduser("~/.state.tmp")
    with open(tmp, "w") as fh:
        fh.write("x")
    os.rename(tmp, os.path.expanduser("~/.state"))
    w["home_rename"] = True
attempt(w, "error", normal)

with open(cfg["report"], "w") as fh:
    json.dump(report, fh)
