#!/usr/bin/env python3
"""The creation gate's attacker (tests/containment.rs,
`a_repository_cannot_be_planted_from_inside_and_the_work_still_works`): a client run by
`vault run` in a project that is a git repository tries every way to leave a repository (or what
makes one: a `.git` directory or file, a bare repository's HEAD) for the person's git to open
later, each with `core.fsmonitor` set to a command that writes a marker. In the same run it does
the normal work a client does. It reports what each attempt got; the test judges from outside.
"""
import ctypes
import errno
import json
import os
import stat
import subprocess
import sys

cfg = json.load(open(sys.argv[1]))
proj, marker = cfg["project"], cfg["marker"]
os.chdir(proj)
os.umask(0o022)
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, AT_EMPTY_PATH, AT_SYMLINK_FOLLOW, SYS_CREAT = -100, 0x1000, 0x400, 85
EVIL = (
    "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
    f"\tfsmonitor = echo planted >> {marker}\n"
)
plants, work = {}, {}


def code(e):
    return errno.errorcode.get(e, str(e))


def tried(name, fn):
    try:
        fn()
        plants[name] = "made"
    except OSError as e:
        plants[name] = code(e.errno)


def c_call(rc):
    if rc < 0:
        raise OSError(ctypes.get_errno(), "")


def link_fd(fd, dst):
    """linkat(/proc/self/fd/N, dst, AT_SYMLINK_FOLLOW), the way O_TMPFILE's manual names a file
    (Python's os.link calls link(2), which does not follow the link)."""
    c_call(libc.linkat(AT_FDCWD, f"/proc/self/fd/{fd}".encode(), AT_FDCWD, dst.encode(), AT_SYMLINK_FOLLOW))


def write(path, text, mode=0o666):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.write(fd, text.encode())
    os.close(fd)


def insides(git, head=True):
    """A repository's insides in the directory `git`, each part tried."""
    for d in ("objects", "refs", "refs/heads"):
        tried(f"{git}/{d}", lambda: os.makedirs(os.path.join(git, d), exist_ok=True))
    tried(f"{git}/config", lambda: write(os.path.join(git, "config"), EVIL))
    if head:
        tried(f"{git}/HEAD", lambda: write(os.path.join(git, "HEAD"), "ref: refs/heads/main\n"))


for i in range(1, 18):
    os.mkdir(f"s{i}")

# A .git directory, from the working directory and from a directory's descriptor.
tried("mkdir s1/.git", lambda: os.mkdir("s1/.git"))
insides("s1/.git")
dfd = os.open("s1", os.O_RDONLY | os.O_DIRECTORY)
tried("mkdirat s1/.git", lambda: os.mkdir(".git", dir_fd=dfd))
# A .git file that redirects to a git directory made beside it.
os.mkdir("s2-gitdir")
insides("s2-gitdir")
tried("file s2/.git", lambda: write("s2/.git", "gitdir: ../s2-gitdir\n"))
# A bare repository (HEAD, objects, refs, config) whose configuration gives it a work tree.
insides("s3")
# A prepared directory and file renamed into place; a HEAD renamed into a prepared directory.
os.makedirs("prep4/objects")
os.makedirs("prep4/refs/heads")
write("prep4/config", EVIL)
tried("rename dir s4/.git", lambda: os.rename("prep4", "s4/.git"))
write("prep4b", "gitdir: ../prep4\n")
tried("rename file s4/.git", lambda: os.rename("prep4b", "s4/.git"))
write("head-to-be", "ref: refs/heads/main\n")
tried("rename prep4/HEAD", lambda: os.rename("head-to-be", "prep4/HEAD"))
# Symbolic links named .git and HEAD.
tried("symlink s5/.git", lambda: os.symlink("../prep4", "s5/.git"))
tried("symlink prep4/HEAD", lambda: os.symlink("refs/heads/main", "prep4/HEAD"))
# Hard links named .git and HEAD.
write("gitfile6", "gitdir: ../prep4\n")
tried("link s6/.git", lambda: os.link("gitfile6", "s6/.git"))
tried("link prep4/HEAD", lambda: os.link("head-to-be", "prep4/HEAD"))
# An unnamed file (O_TMPFILE) given a name: through /proc/self/fd, and with AT_EMPTY_PATH.
tmp = os.open("s7", os.O_TMPFILE | os.O_WRONLY, 0o644)
os.write(tmp, b"gitdir: ../prep4\n")
tried("tmpfile s7/.git", lambda: link_fd(tmp, "s7/.git"))
tried("tmpfile empty-path s7/.git", lambda: c_call(libc.linkat(tmp, b"", AT_FDCWD, b"s7/.git", AT_EMPTY_PATH)))
# O_CREAT through a dangling symbolic link to .git (relative, and absolute).
os.symlink(".git", "s8/link")
tried("open through s8/link", lambda: write("s8/link", "gitdir: ../prep4\n"))
os.symlink(f"{proj}/s8/.git", "abs-link")
tried("open through abs-link", lambda: write("abs-link", "gitdir: ../prep4\n"))
# creat(2) itself, and mknod(2) of a FIFO and of a regular file.
tried("creat s9/.git", lambda: c_call(libc.syscall(SYS_CREAT, b"s9/.git", 0o644)))
tried("mknod s10/.git", lambda: os.mknod("s10/.git", stat.S_IFIFO | 0o644))
tried("mknod s10/HEAD", lambda: os.mknod("s10/HEAD", stat.S_IFREG | 0o644))
# git itself.
r = subprocess.run(["git", "init", "-q", "s11"], capture_output=True, text=True)
plants["git init s11"] = r.returncode
tried("git init s11 config", lambda: write("s11/.git/config", EVIL))
# Another case; through a symlinked parent; through /proc magic links to the working directory.
tried("mkdir s13/.GIT", lambda: os.mkdir("s13/.GIT"))
os.symlink("s14", "s14-link")
tried("mkdir s14-link/.git", lambda: os.mkdir("s14-link/.git"))
tried("mkdir /proc/self/cwd/s15/.git", lambda: os.mkdir("/proc/self/cwd/s15/.git"))
tried("mkdir /proc/PID/cwd/s16/.git", lambda: os.mkdir(f"/proc/{os.getpid()}/cwd/s16/.git"))
# Beneath the project's own .git, git makes what it needs; a repository inside .git's objects
# would be opened by nobody, but a .git file there still is one.
tried("file s17/.git", lambda: write("s17/.git", "gitdir: ../.git\n"))

# Inside the project's own git directory, where git makes HEAD, objects and refs: a directory
# there dressed as a repository (for a symbolic link from outside to lead git into), and
# directories carried out of it (with its HEAD) or into it.
tried("mkdir .git/logs/objects", lambda: os.mkdir(".git/logs/objects"))
os.mkdir(".git/evil")
tried("mkdir .git/evil/objects", lambda: os.mkdir(".git/evil/objects"))
tried("file .git/evil/HEAD", lambda: write(".git/evil/HEAD", "ref: refs/heads/main\n"))
tried("file .git/evil/commondir", lambda: write(".git/evil/commondir", "..\n"))
os.symlink(".git/logs", "s18")
os.symlink(".git/evil", "s19")
tried("rename .git/logs out", lambda: os.rename(".git/logs", "s20"))
os.makedirs("prep21/objects")
os.makedirs("prep21/refs")
write("prep21/config", EVIL)
tried("rename prep21 into .git/refs", lambda: os.rename("prep21", ".git/refs/prep21"))

# The project's own git directory moved away (a new one could then be made).
tried("rename .git", lambda: os.rename(".git", "moved-git"))

# What would go around the gate: a user namespace of its own (then mounts, and a /proc of
# its own), io_uring (its workers make files where no filter sees them), openat2 and clone3
# (their flags are in memory a filter cannot read).
escapes = {}


def own_listener():
    """A seccomp filter with a listener of the client's own (for call 1023, which no program
    makes): were it allowed, the client could answer its own suspended calls "continue"."""
    # struct sock_filter {u16 code; u8 jt; u8 jf; u32 k}, one little-endian u64 each.
    filt = (ctypes.c_uint64 * 4)(
        0x20 | (0 << 32),  # ld [0] (nr)
        0x15 | (0 << 16) | (1 << 24) | (1023 << 32),  # jeq 1023, 0, 1
        0x06 | (0x7FC00000 << 32),  # ret USER_NOTIF
        0x06 | (0x7FFF0000 << 32),  # ret ALLOW
    )

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.c_void_p)]

    prog = Prog(4, ctypes.cast(filt, ctypes.c_void_p))
    libc.prctl(38, 1, 0, 0, 0)  # no new privileges
    c_call(libc.syscall(317, 1, 8, ctypes.byref(prog)))  # SECCOMP_SET_MODE_FILTER, NEW_LISTENER


for name, fn in {
    "own seccomp listener": own_listener,
    "unshare(CLONE_NEWUSER)": lambda: c_call(libc.unshare(0x10000000)),
    "io_uring_setup": lambda: c_call(libc.syscall(425, 4, ctypes.create_string_buffer(120))),
    "openat2": lambda: c_call(libc.syscall(437, AT_FDCWD, b"s12/.git", ctypes.create_string_buffer(24), 24)),
    "clone3": lambda: c_call(libc.syscall(435, ctypes.create_string_buffer(88), 88)),
}.items():
    try:
        fn()
        escapes[name] = "worked"
    except OSError as e:
        escapes[name] = code(e.errno)
escapes["unshare -r"] = subprocess.run(["unshare", "-r", "true"], capture_output=True).returncode

# The normal work, with the modes the umask gives.
os.makedirs("work/d1/d2")
write("work/a.txt", "a\n")
os.umask(0o027)
write("work/b.txt", "b\n")
os.mkdir("work/d3")
os.umask(0o022)
write("work/c.tmp", "c\n")
os.rename("work/c.tmp", "work/c.txt")
os.rename("work/d3", "work/d4")
os.link("work/a.txt", "work/a.hard")
os.symlink("a.txt", "work/a.sym")
with open("work/a.sym", "a") as f:
    f.write("more\n")
os.symlink("through-link.txt", "work/dangling")
write("work/dangling", "through a link\n")
tmp = os.open("work", os.O_TMPFILE | os.O_WRONLY, 0o640)
os.write(tmp, b"unnamed, then named\n")
link_fd(tmp, "work/tmpfile.txt")
os.mkfifo("work/fifo")
try:
    os.open("work/a.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    work["excl"] = "made"
except OSError as e:
    work["excl"] = code(e.errno)
try:
    os.mkdir("work/d1")
    work["mkdir again"] = "made"
except OSError as e:
    work["mkdir again"] = code(e.errno)
# What tools do to metadata (the gate performs each for the client): `chmod +x`, `touch`, an
# installer's modes, times and attributes in node_modules, the same through descriptors.
write("work/script.sh", "#!/bin/sh\necho ran\n")
for args in [["chmod", "+x", "work/script.sh"], ["touch", "-d", "@1000000", "work/c.txt"]]:
    work[" ".join(args[:2])] = subprocess.run(args, capture_output=True, text=True).returncode
work["script"] = subprocess.run(["work/script.sh"], capture_output=True, text=True).stdout
os.makedirs("node_modules/pkg/bin")
write("node_modules/pkg/bin/cli.js", "#!/usr/bin/env node\n")
os.chmod("node_modules/pkg/bin/cli.js", 0o755)
os.chmod("node_modules/pkg", 0o700)
fd = os.open("node_modules/pkg/bin/cli.js", os.O_RDONLY)
os.fchmod(fd, 0o750)
os.utime(fd, (2000000, 2000000))
os.setxattr(fd, "user.installer", b"npm")
os.close(fd)
os.utime("node_modules/pkg/bin", (3000000, 3000000), follow_symlinks=False)
os.chown("node_modules/pkg/bin/cli.js", os.getuid(), os.getgid())
os.setxattr("node_modules/pkg/bin", "user.dir", b"1")
os.removexattr("node_modules/pkg/bin", "user.dir")
try:
    os.chmod("work/missing", 0o755)
    work["chmod missing"] = "done"
except OSError as e:
    work["chmod missing"] = code(e.errno)
r = subprocess.run(
    ["sh", "-c", "echo dev-stdout > /dev/stdout; echo proc-fd > /proc/self/fd/1; echo err > /dev/stderr"],
    capture_output=True,
    text=True,
)
work["dev_stdout"], work["dev_stderr"] = r.stdout, r.stderr
git = ["git", "-c", "user.name=client", "-c", "user.email=c@example.invalid"]
write("inside.txt", "written inside\n")
steps = [
    git + ["add", "inside.txt", "work"],
    git + ["commit", "-q", "-m", "work inside"],
    git + ["checkout", "-q", "-b", "inside-branch"],
    git + ["init", "-q", "/tmp/inner"],
    git + ["-C", "/tmp/inner", "commit", "-q", "--allow-empty", "-m", "x"],
    git + ["clone", "-q", proj, "/tmp/clone"],
]
work["git"] = []
for s in steps:
    r = subprocess.run(s, capture_output=True, text=True)
    work["git"].append({"cmd": " ".join(s[5:]), "rc": r.returncode, "err": r.stderr[-300:]})

json.dump({"plants": plants, "escapes": escapes, "work": work}, open("gate-report.json", "w"), indent=1)
