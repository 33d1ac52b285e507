"""What the bench scripts share: ports, the evlab binary, a docroot, /proc readings, and child
processes started in process groups of their own and stopped as groups.

Every long-running child is started with `spawn_group` (its own session, so a terminal's Ctrl-C
reaches only the script) and stopped with `stop_group`: SIGTERM to the whole group, SIGKILL
after a bounded wait, then a check that no process of the group is left. `stop_all_groups` stops
whatever is still running (a script's `finally`), and `leftovers` lists any process of a group the
script started, or descended from it, that is still alive.
"""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK = os.sysconf("SC_CLK_TCK")
NOFILE = 65536
PRLIMIT = [f"--nofile={NOFILE}:{NOFILE}"]
PRLIMIT = ["prlimit"] + PRLIMIT
if not shutil.which("prlimit") or subprocess.run(PRLIMIT + ["true"], capture_output=True).returncode:
    PRLIMIT = []  # not permitted here: every server keeps the inherited limit


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def size_bytes(s):
    """"16K", "1M", "300" as bytes."""
    s = s.strip().upper()
    mult = {"K": 1024, "M": 1 << 20}.get(s[-1:], 1)
    return int(float(s.rstrip("KM")) * mult)


def start_origin(evlab, root, cpu):
    """An `evlab serve` origin (epoll-et, no header timeout) for `root` on CPU `cpu`, on a free
    port: (its process group, the port). The caller waits for it and stops it."""
    port = free_port()
    proc = spawn_group(PRLIMIT + ["taskset", "-c", cpu, evlab, "serve", "--listen",
                                  f"127.0.0.1:{port}", "--root", root, "--mechanism", "epoll-et",
                                  "--header-timeout", "0"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, port


def evlab_bin(name):
    return os.path.join(ROOT, "target", "release", name)


def supported(binary=None):
    """The mechanisms `evlab serve` supports on this kernel; prints why for the others."""
    out = subprocess.run([binary or evlab_bin("evlab"), "serve", "--list-mechanisms"],
                         capture_output=True, text=True, check=True).stdout
    ok = set()
    for line in out.splitlines():
        name = line.split()[0]
        if "supported: yes" in line:
            ok.add(name)
        else:
            print(f"note: {line.strip()}", file=sys.stderr)
    return ok


def stats(port, timeout=10):
    """`GET /.evlab/stats` of an `evlab serve --stats`, as a dict."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/.evlab/stats", timeout=timeout) as r:
        return json.load(r)


def make_docroot(tmp):
    # nginx's workers run as an unprivileged user: the whole path must be world-readable, or
    # every reply is a 403 (which would be measured as if it were the real thing).
    os.chmod(tmp, 0o755)
    d = os.path.join(tmp, "www")
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o755)
    with open(os.path.join(d, "one"), "wb") as f:
        f.write(b"a")
    os.chmod(os.path.join(d, "one"), 0o644)
    return d


def wait_port(port, timeout=10):
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


# ---- /proc ----

def _stat(pid):
    """(state, ppid, pgrp, utime + stime ticks) of pid, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read()
    except OSError:
        return None
    f = st[st.rfind(")") + 2:].split()  # the command name may hold spaces and parentheses
    return f[0], int(f[1]), int(f[2]), int(f[11]) + int(f[12])


def _pids():
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def proc_tree(pid):
    """pid and all its descendants."""
    kids = {}
    for p in _pids():
        s = _stat(p)
        if s:
            kids.setdefault(s[1], []).append(p)
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def cpu_seconds(pid):
    return sum((_stat(p) or (0, 0, 0, 0))[3] for p in proc_tree(pid)) / CLK


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


# ---- process groups ----

_RUNNING = []  # Popen of each group started and not stopped yet
_PGIDS = set()  # every group started, stopped or not


def spawn_group(argv, **kw):
    """Popen(argv) as the leader of a new session and process group."""
    p = subprocess.Popen(argv, start_new_session=True, **kw)
    _RUNNING.append(p)
    _PGIDS.add(p.pid)
    return p


def group_members(pgid):
    """Live (not zombie) processes of the process group pgid."""
    return [p for p in _pids() if (s := _stat(p)) and s[2] == pgid and s[0] not in "ZX"]


def _killpg(pgid, sig):
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def stop_group(p, grace=10.0):
    """SIGTERM to p's process group; SIGKILL if p has not exited after `grace` seconds; then
    waits (again at most `grace`) until no process of the group is left. Returns the pids that
    were still there after that (they are then killed): an empty list is a clean stop."""
    if p.poll() is None:
        _killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _killpg(p.pid, signal.SIGKILL)
            p.wait()
    end = time.time() + grace
    while group_members(p.pid) and time.time() < end:
        time.sleep(0.02)
    left = group_members(p.pid)
    if left:
        _killpg(p.pid, signal.SIGKILL)
        time.sleep(0.05)
    if p in _RUNNING:
        _RUNNING.remove(p)
    return left


def stop_all_groups(grace=5.0, except_=()):
    """Stops every group still running (but those of `except_`), latest first; returns the pids
    that outlived their stop."""
    left = []
    for p in reversed(list(_RUNNING)):
        if p not in except_:
            left += stop_group(p, grace)
    return left


def leftovers():
    """[(pid, command)] of live processes in a group this script started, or descended from it."""
    me = os.getpid()
    mine = set(proc_tree(me)) - {me}
    out = []
    for p in _pids():
        s = _stat(p)
        if s and s[0] not in "ZX" and (s[2] in _PGIDS or p in mine):
            out.append((p, cmdline(p)))
    return out


class Server:
    def __init__(self, name, argv, port, cwd=None, log=None):
        self.name, self.argv, self.port = name, argv, port
        # Every server gets the same descriptor limit, high enough for 10,000 idle connections
        # plus the load (lighttpd allows at most half its limit as connections).
        err = open(log, "w") if log else subprocess.DEVNULL
        try:
            self.proc = spawn_group(PRLIMIT + ["taskset", "-c", "0"] + argv,
                                    stdout=subprocess.DEVNULL, stderr=err, cwd=cwd)
        finally:
            if log:
                err.close()
        if not wait_port(port):
            self.stop()
            raise RuntimeError(f"{name} did not start: {' '.join(argv)}")

    def cpu(self):
        return cpu_seconds(self.proc.pid)

    def stop(self):
        """Stops the server's whole group; returns the pids left after the stop (none)."""
        return stop_group(self.proc)


class Idle:
    """A running `evlab idle`: its Popen and its latest progress line (stdout is drained by a
    thread, so the holder never blocks on a full pipe)."""

    def __init__(self, argv, n):
        self.n, self.last, self.up = n, "", threading.Event()
        self.proc = spawn_group(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stdout:
            self.last = line.strip()
            if self.last == f"idle: all {self.n} connections up":
                self.up.set()

    def held(self):
        """Connections up according to the latest line (n once all were up and none lost)."""
        words = self.last.split()
        if len(words) > 2 and words[1] == "all":
            return int(words[2])
        return int(words[1]) if len(words) > 1 and words[1].isdigit() else 0


@contextlib.contextmanager
def hold_idle(port, n, extra=(), timeout=60, binary=None):
    """Holds n idle connections with `evlab idle` (CPU 1; `binary`, or this tree's build) for
    the body of a `with`, which gets the `Idle`; nothing (None) when n is 0. Enters once all n
    are up, within `timeout` seconds."""
    if not n:
        yield None
        return
    idle = Idle(["taskset", "-c", "1", binary or evlab_bin("evlab"), "idle", "--server", "127.0.0.1",
                 "--port", str(port), *extra, str(n)], n)
    try:
        t0 = time.time()
        while not idle.up.wait(0.2):
            if idle.proc.poll() is not None:
                raise RuntimeError("idle holder exited before all connections were up")
            if time.time() - t0 > timeout:
                raise RuntimeError(f"idle holder did not bring all connections up ({idle.last})")
        yield idle
    finally:
        stop_group(idle.proc)
