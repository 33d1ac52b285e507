#!/usr/bin/env python3
"""evlab soak: per engine, --duration seconds (default 600) of well-behaved load plus
--idle idle connections (default 10,000) plus a slowloris crowd; then everything stops and the
server must be back where it started.

Per engine (--engines, default epoll-et,uring,select), on a small file set:
- `evlab serve --stats --header-timeout H` (H = --header-timeout, 10 s) pinned to CPU 0, in its
  own process group, with the descriptor limit raised as serve_bench does where permitted. After
  one GET of every file (so the content cache holds its descriptors) its descriptor count and RSS
  are the baseline.
- `evlab idle` (CPU 1) holds --idle connections from --idle/1,000 source addresses of
  127.1.0.0/16. The header timeout cannot tell an idle connection from a slow one: it closes every
  connection that has not sent a request head within H, and the holder re-opens it at once. So
  the idle connections are a standing population of --idle, each renewed every H seconds
  (--idle / H re-connects per second; the holder's --rate, --idle-rate, spreads them out).
- the slowloris crowd (--slowloris clients, in this script, from 127.5.0.0/16): each sends a
  request line and a header, then one byte every --slow-every seconds, never ending the head.
  The header timeout must answer 408 and close each within H; the client reconnects.
- the well-behaved load: `evlab load` (CPU 1), open loop, --rate requests/s as --calls keep-alive
  calls per connection over the file set, in consecutive --segment second runs (60 s), so that
  errors and RSS are reported per minute.
- every --interval seconds: the server's RSS, descriptors, CPU time and stats (a GET of
  /.evlab/stats, itself a well-behaved request), the idle holder's count, the crowd's.
Then the load ends, the idle holder and the crowd stop, the script waits (at most --settle s) for
the server's descriptors to fall back to the baseline, stops the server's group (SIGTERM, SIGKILL
after 10 s) and looks for any process left.

Verdicts per engine (the run exits 1 when one fails):
- errors: every well-behaved request answered 2xx — 0 load errors (client-timo, reset, refused,
  ...), 0 non-2xx replies, 0 calls unanswered, every segment finished, 0 failed stats probes.
- rss: max RSS over the last window <= 1.05 x median RSS over the second window. Windows are
  60 s (min(60, duration / 3) for short runs): minute 2 (60-120 s) against the last minute.
- fds: after the clients stopped, the server's descriptors fell to the baseline or below.
- procs: the server's process group was empty after its stop, and no process of any group this
  script started, nor any descendant of the script, is alive.
- slowloris: the header timeout closed crowd connections, none lived longer than H + 5 s.

Writes results/bench/soak-<timestamp>/{samples.csv,summary.md} (plus each load segment's JSON
report and the server's log) and prints the summary. Ctrl-C stops every process and writes what
was measured. Usage:
  bench/soak.py [--duration 600] [--engines epoll-et,uring,select] [--idle 10000]
                [--slowloris 300] [--rate 5000] [--evlab PATH]
"""

import argparse
import csv
import json
import os
import random
import resource
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (NOFILE, PRLIMIT, ROOT, Server, cpu_seconds, evlab_bin, fd_count,  # noqa: E402
                     free_port, hold_idle, leftovers, make_docroot, rss_kib, spawn_group, stats,
                     stop_all_groups, stop_group, supported)

FILES = {"one": 1, "f1k": 1024, "f16k": 16384, "f64k": 65536}
URIS = ["/one", "/f1k", "/f16k", "/f64k", "/d/"]
RSS_SLACK = 1.05
SAMPLE_FIELDS = ["engine", "t_s", "segment", "rss_kib", "fds", "cpu_s", "active", "max_active",
                 "accepted", "header_timeouts", "requests", "idle_held", "slowloris_open",
                 "pool_bytes", "spare_shells", "table_slots", "timer_entries"]


def make_fileset(tmp):
    d = make_docroot(tmp)  # /one
    for name, size in FILES.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(bytes(i % 251 for i in range(size)))
    os.makedirs(os.path.join(d, "d"), exist_ok=True)
    with open(os.path.join(d, "d", "index.html"), "w") as f:
        f.write("<h1>soak</h1>\n")
    uris = os.path.join(tmp, "uris.txt")
    with open(uris, "w") as f:
        f.write("\n".join(URIS) + "\n")
    return d, uris


class Slowloris:
    """n clients that each send a request line and a header at once, then one more byte of a
    header every `every` seconds (jittered), never ending the head. A connection the server
    closes is re-opened 50-500 ms later. Runs in a thread for the body of a `with`."""

    HEAD = b"GET /one HTTP/1.1\r\nHost: soak\r\n"
    TRICKLE = b"X-Slowloris: still-here\r\n"

    def __init__(self, port, n, every):
        self.port, self.n, self.every = port, n, every
        self.stop = threading.Event()
        self.opened = self.closed = self.resets = self.r408 = self.other = self.connect_errors = 0
        self.lifetimes = []  # seconds from connect to the server's close
        self.open_now = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        if self.n:
            self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(10)

    def _run(self):
        rng = random.Random(11)
        sel = selectors.DefaultSelector()
        now = time.monotonic()
        # Per client: socket, connected, when it connected, when it next acts, trickle position.
        slots = [dict(sock=None, up=False, t0=0.0, due=now + i / max(self.n, 1), pos=0)
                 for i in range(self.n)]

        def drop(i, now, lived):
            s = slots[i]
            sel.unregister(s["sock"])
            s["sock"].close()
            if s["up"]:
                self.open_now -= 1
                if lived:
                    self.lifetimes.append(now - s["t0"])
            s.update(sock=None, up=False, due=now + rng.uniform(0.05, 0.5))

        try:
            while not self.stop.is_set():
                now = time.monotonic()
                for i, s in enumerate(slots):
                    if s["sock"] is None and now >= s["due"]:
                        c = socket.socket()
                        c.setblocking(False)
                        c.bind((f"127.5.0.{i % 200 + 1}", 0))
                        c.connect_ex(("127.0.0.1", self.port))
                        sel.register(c, selectors.EVENT_WRITE, i)
                        s.update(sock=c, t0=now, due=now + 5)  # connect timeout
                    elif s["sock"] is not None and now >= s["due"]:
                        if not s["up"]:
                            self.connect_errors += 1
                            drop(i, now, False)
                            continue
                        try:
                            s["sock"].send(self.TRICKLE[s["pos"]:s["pos"] + 1])
                            s["pos"] = (s["pos"] + 1) % len(self.TRICKLE)
                            s["due"] = now + self.every * rng.uniform(0.5, 1.5)
                        except OSError:
                            self.resets += 1
                            drop(i, now, True)
                for key, _ in sel.select(0.05):
                    i, c = key.data, key.fileobj
                    s = slots[i]
                    now = time.monotonic()
                    if not s["up"]:
                        if c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                            self.connect_errors += 1
                            drop(i, now, False)
                            continue
                        s.update(up=True, t0=now, pos=0, due=now + self.every * rng.uniform(0.5, 1.5))
                        self.opened += 1
                        self.open_now += 1
                        sel.modify(c, selectors.EVENT_READ, i)
                        try:
                            c.send(self.HEAD)
                        except OSError:
                            self.resets += 1
                            drop(i, now, True)
                        continue
                    try:
                        data = c.recv(65536)
                    except OSError:
                        self.resets += 1
                        drop(i, now, True)
                        continue
                    if not data:
                        self.closed += 1
                        drop(i, now, True)
                    elif data.startswith(b"HTTP/1.1 408 "):
                        self.r408 += 1
                    elif data.startswith(b"HTTP/"):
                        self.other += 1
        finally:
            for s in slots:
                if s["sock"] is not None:
                    s["sock"].close()
            self.open_now = 0
            sel.close()


class Sampler:
    """Every `interval` seconds, a row of the server's state; runs in a thread for the body of
    a `with`. `segment` is read from `ctx["segment"]` (the load segment running)."""

    def __init__(self, engine, server, idle, crowd, interval, ctx):
        self.engine, self.server, self.idle, self.crowd = engine, server, idle, crowd
        self.interval, self.ctx = interval, ctx
        self.rows, self.probe_errors, self.stop = [], [], threading.Event()
        self.t0 = time.monotonic()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(30)

    def _run(self):
        pid, port = self.server.proc.pid, self.server.port
        while True:
            t = time.monotonic() - self.t0
            row = dict(engine=self.engine, t_s=round(t, 2), segment=self.ctx["segment"])
            try:
                row.update(rss_kib=rss_kib(pid), fds=fd_count(pid), cpu_s=round(cpu_seconds(pid), 2))
            except (OSError, RuntimeError) as e:
                self.probe_errors.append(f"t={t:.0f}s: /proc: {e}")
            try:
                st = stats(port, timeout=5)
                c = st["connections"]
                row.update(active=c["active"], max_active=c["max_active"],
                           accepted=c["accepted"], header_timeouts=c["header_timeouts"],
                           requests=st["requests"], timer_entries=st["timers"]["entries"])
                # What the server keeps for reuse follows the most connections open at once:
                # with these beside RSS, growth that tracks max_active is told from a leak.
                row.update({k: v for k, v in st.get("memory", {}).items()
                            if k in ("pool_bytes", "spare_shells", "table_slots")})
            except Exception as e:  # noqa: BLE001 -- any failure is a failed well-behaved request
                self.probe_errors.append(f"t={t:.0f}s: stats: {e}")
            row.update(idle_held=self.idle.held() if self.idle else 0,
                       slowloris_open=self.crowd.open_now)
            self.rows.append(row)
            if self.stop.wait(max(self.interval - (time.monotonic() - self.t0 - t), 0.05)):
                return


def get_all(port):
    """One GET of every URI; raises unless each answers 200."""
    for u in URIS:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{u}", timeout=10) as r:
            r.read()
            if r.status != 200:
                raise RuntimeError(f"GET {u}: {r.status}")


def load_segment(args, binary, port, uris, seconds, json_path, log):
    """One `evlab load` run of `seconds`; returns its figures (failed: why it gave no report)."""
    conn_rate = args.rate / args.calls
    argv = ["taskset", "-c", "1", binary, "load", "--server", "127.0.0.1", "--port", str(port),
            "--uri-list", uris, "--rate", f"{conn_rate:g}", "--num-calls", str(args.calls),
            "--duration", f"{seconds:.1f}", "--timeout", str(args.timeout), "--json", json_path,
            "--quiet"]
    p = spawn_group(argv, stdout=subprocess.DEVNULL, stderr=log)
    limit = seconds + args.timeout * (args.calls + 1) + 30
    try:
        p.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        return dict(failed=f"evlab load did not finish within {limit:.0f} s")
    finally:
        left = stop_group(p)  # stops it if still running; checks its group is empty either way
    if left:
        return dict(failed=f"evlab load left processes {left}")
    if p.returncode != 0:
        return dict(failed=f"evlab load exited with {p.returncode}")
    with open(json_path) as f:
        r = json.load(f)
    st = r["replies"]["status"]
    non2xx = st["1xx"] + st["3xx"] + st["4xx"] + st["5xx"]
    conns = r["connections"]["initiated"]
    return dict(failed="", conns=conns, replies=r["replies"]["total"],
                errors=r["errors"]["total"],
                causes={k: v for k, v in r["errors"].items() if k != "total" and v},
                non2xx=non2xx, unanswered=max(conns * args.calls - r["replies"]["total"], 0),
                p99_ms=r["latency_ms"]["p99"], max_ms=r["latency_ms"]["max"],
                start_rate=r["schedule"]["achieved_start_rate"] or 0.0,
                duration_s=r["duration_s"])


def window(rows, a, b, key="rss_kib"):
    return [r[key] for r in rows if a <= r["t_s"] < b and key in r]


def soak_engine(engine, args, binary, docroot, uris, outdir, result):
    """Runs one engine's soak, filling `result` as it goes (so an interrupt keeps what was done)."""
    port = free_port()
    argv = [binary, "serve", "--listen", f"127.0.0.1:{port}", "--root", docroot, "--mechanism",
            engine, "--stats", "--header-timeout", str(args.header_timeout)]
    result.update(engine=engine, segments=[], rows=[], probe_errors=[], left=[], crowd=None,
                  command="taskset -c 0 " + " ".join(argv))
    server = Server(f"evlab-{engine}", argv, port, log=os.path.join(outdir, f"serve-{engine}.log"))
    try:
        pid = server.proc.pid
        get_all(port)
        time.sleep(1)
        result.update(base_fds=fd_count(pid), base_rss=rss_kib(pid))
        print(f"{engine}: baseline {result['base_fds']} descriptors, RSS {result['base_rss']} KiB",
              file=sys.stderr)
        ctx = dict(segment=0)
        idle_extra = ["--source-addrs", str(max(1, args.idle // 1000)),
                      "--rate", str(args.idle_rate)]
        with open(os.path.join(outdir, f"load-{engine}.log"), "w") as log, \
                hold_idle(port, args.idle, idle_extra, timeout=args.idle / args.idle_rate + 60,
                          binary=binary) as idle, \
                Slowloris(port, args.slowloris, args.slow_every) as crowd:
            result["crowd"] = crowd
            time.sleep(min(2.0, args.slow_every))  # the crowd connects
            with Sampler(engine, server, idle, crowd, args.interval, ctx) as sampler:
                result["rows"], result["probe_errors"] = sampler.rows, sampler.probe_errors
                end = sampler.t0 + args.duration
                while end - time.monotonic() >= 1:
                    ctx["segment"] += 1
                    n = ctx["segment"]
                    t_start = time.monotonic() - sampler.t0
                    seconds = min(args.segment, end - time.monotonic())
                    seg = load_segment(args, binary, port, uris, seconds,
                                       os.path.join(outdir, "load", f"{engine}-{n:02d}.json"), log)
                    seg.update(n=n, t_start=t_start, t_end=time.monotonic() - sampler.t0)
                    result["segments"].append(seg)
                    rss = window(sampler.rows, t_start, seg["t_end"])
                    print(f"{engine}: segment {n} ({t_start:.0f}-{seg['t_end']:.0f} s): "
                          + (f"FAILED: {seg['failed']}" if seg["failed"] else
                             f"{seg['replies']} replies, {seg['errors']} errors, {seg['non2xx']} "
                             f"non-2xx, {seg['unanswered']} unanswered, p99 {seg['p99_ms']:.1f} ms")
                          + (f"; RSS {min(rss)}-{max(rss)} KiB" if rss else "")
                          + f"; idle {idle.held() if idle else 0}, slowloris {crowd.open_now}",
                          file=sys.stderr)
        # Load, idle holder and crowd are stopped: the server must give back every descriptor.
        t0 = time.monotonic()
        while fd_count(pid) > result["base_fds"] and time.monotonic() - t0 < args.settle:
            time.sleep(0.5)
        result.update(end_fds=fd_count(pid), end_rss=rss_kib(pid),
                      settle_s=time.monotonic() - t0)
        try:
            result["final_stats"] = stats(port, timeout=5)
        except Exception as e:  # noqa: BLE001
            result["probe_errors"].append(f"final stats: {e}")
    finally:
        # Clients first (on an interrupt, a load segment may still run), then the server; what
        # outlives its stop, or is found alive after, is left over.
        left = stop_all_groups(except_=[server.proc])
        left += server.stop()
        result["server_exit"] = server.proc.returncode
        result["left"] = [f"{p} (outlived its stop)" for p in left]
        result["left"] += [f"{p} {cmd}" for p, cmd in leftovers()]


def verdicts(r, args):
    """{name: (passed, text)} for one engine's result."""
    out = {}
    segs = r.get("segments", [])
    failed = [s for s in segs if s["failed"]]
    errs = sum(s.get("errors", 0) for s in segs)
    non2xx = sum(s.get("non2xx", 0) for s in segs)
    unans = sum(s.get("unanswered", 0) for s in segs)
    probes = len(r.get("probe_errors", []))
    replies = sum(s.get("replies", 0) for s in segs)
    out["errors"] = (bool(segs) and not failed and errs + non2xx + unans + probes == 0,
                     f"{replies:,} replies; {errs} errors, {non2xx} non-2xx, {unans} unanswered, "
                     f"{len(failed)} failed segments, {probes} failed probes")
    rows = r.get("rows", [])
    w = min(60.0, args.duration / 3)
    second, last = window(rows, w, 2 * w), window(rows, args.duration - w, args.duration + 1)
    if second and last:
        med, top = statistics.median(second), max(last)
        out["rss"] = (top <= RSS_SLACK * med,
                      f"{med / 1024:.1f} MiB (median, {w:.0f}-{2 * w:.0f} s) -> {top / 1024:.1f} MiB "
                      f"(max, {args.duration - w:.0f}-{args.duration:.0f} s): x{top / med:.3f}")
    else:
        out["rss"] = (False, "not enough samples")
    if "end_fds" in r:
        peak = max(window(rows, 0, 1e9, "fds") or [0])
        out["fds"] = (r["end_fds"] <= r["base_fds"],
                      f"{r['base_fds']} -> {peak} (peak) -> {r['end_fds']} after {r['settle_s']:.1f} s")
    else:
        out["fds"] = (False, "not measured")
    out["procs"] = (not r.get("left"), "none left" if not r.get("left") else "; ".join(r["left"]))
    crowd = r.get("crowd")
    if args.slowloris and args.header_timeout and crowd is not None:
        lt = crowd.lifetimes
        longest = max(lt) if lt else 0.0
        ok = bool(lt) and longest <= args.header_timeout + 5
        out["slowloris"] = (ok, f"{crowd.opened} opened, {crowd.closed} closed by the server "
                                f"({crowd.r408} after a 408), {crowd.resets} reset; lived "
                                f"{statistics.median(lt) if lt else 0:.1f} s median, {longest:.1f} s max")
    return out


def summary(results, args, stamp, argv, load0, interrupted):
    uname = os.uname()
    lines = [f"# evlab soak ({stamp})", "",
             f"Machine: {uname.sysname} {uname.release}, {os.cpu_count()} CPUs; load average "
             f"{load0[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end. Server on CPU 0; "
             "evlab load, evlab idle and the slowloris crowd on CPU 1.",
             f"Command: `bench/soak.py {' '.join(argv)}`", "",
             f"Per engine: {args.duration} s of `evlab load` at {args.rate} requests/s "
             f"({args.rate / args.calls:g} connections/s x {args.calls} keep-alive calls over "
             f"{', '.join(URIS)}; --timeout {args.timeout}) in {args.segment} s segments; "
             f"{args.idle} idle connections (`evlab idle`, renewed by the {args.header_timeout} s "
             f"header timeout, --rate {args.idle_rate}); {args.slowloris} slowloris clients "
             f"(a byte every ~{args.slow_every} s).", ""]
    if interrupted:
        lines += ["**Interrupted (Ctrl-C): the figures below are partial.**", ""]
    names = ["errors", "rss", "fds", "procs", "slowloris"]
    lines += ["| engine | " + " | ".join(names) + " | verdict |", "|---" * (len(names) + 2) + "|"]
    failed_any = False
    for r in results:
        if r.get("skipped"):
            lines.append(f"| {r['engine']} | skipped: {r['skipped']} |" + " |" * len(names))
            continue
        v = verdicts(r, args)
        ok = all(p for p, _ in v.values()) and not r.get("error")
        failed_any |= not ok
        cells = [(("PASS" if v[n][0] else "FAIL") + ": " + v[n][1]) if n in v else "n/a" for n in names]
        lines.append(f"| {r['engine']} | " + " | ".join(cells) + f" | {'PASS' if ok else 'FAIL'} |")
    for r in results:
        if r.get("skipped"):
            continue
        lines += ["", f"## {r['engine']}", "", f"Server: `{r.get('command', '')}`"]
        if r.get("error"):
            lines.append(f"Stopped by an error: {r['error']}")
        if "base_fds" in r:
            lines.append(f"Baseline: {r['base_fds']} descriptors, RSS {r['base_rss'] / 1024:.1f} MiB; "
                         f"after the clients stopped: {r.get('end_fds', '?')} descriptors, RSS "
                         f"{r.get('end_rss', 0) / 1024:.1f} MiB; server exit status "
                         f"{r.get('server_exit')}.")
        fs = r.get("final_stats")
        if fs:
            c = fs["connections"]
            lines.append(f"Server counters: {c['accepted']:,} connections accepted, {c['closed']:,} "
                         f"closed, {c['header_timeouts']:,} header timeouts, {c['send_timeouts']} "
                         f"send timeouts, {c['io_errors']} I/O errors, {c['accept_errors']} accept "
                         f"errors; {fs['requests']:,} requests; responses {fs['responses']}.")
        if r.get("probe_errors"):
            lines.append("Failed probes: " + "; ".join(r["probe_errors"][:10]))
        lines += ["", "| segment | seconds | replies | replies/s | errors | non-2xx | unanswered "
                  "| p99 ms | max ms | RSS MiB min-max | fds max | idle held (min) | slowloris open |",
                  "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
        for s in r.get("segments", []):
            rows = [x for x in r["rows"] if s["t_start"] <= x["t_s"] < s["t_end"]]
            rss = [x["rss_kib"] for x in rows if "rss_kib" in x]
            fds = [x["fds"] for x in rows if "fds" in x]
            held = [x["idle_held"] for x in rows]
            slow = [x["slowloris_open"] for x in rows]
            span = f"{s['t_start']:.0f}-{s['t_end']:.0f}"
            if s["failed"]:
                lines.append(f"| {s['n']} | {span} | FAILED: {s['failed']} |" + " |" * 10)
                continue
            causes = ", ".join(f"{k} {v}" for k, v in s["causes"].items())
            lines.append(
                f"| {s['n']} | {span} | {s['replies']:,} | {s['replies'] / max(s['duration_s'], 1e-9):,.0f} "
                f"| {s['errors']}{f' ({causes})' if causes else ''} | {s['non2xx']} | {s['unanswered']} "
                f"| {s['p99_ms']:.1f} | {s['max_ms']:.1f} "
                f"| {f'{min(rss) / 1024:.1f}-{max(rss) / 1024:.1f}' if rss else ''} "
                f"| {max(fds) if fds else ''} | {min(held) if held else ''} "
                f"| {min(slow) if slow else ''}-{max(slow) if slow else ''} |")
    lines += ["", "Verdicts: errors — every well-behaved request (load and stats probes) answered "
              "2xx; rss — max RSS of the last window <= 1.05 x median RSS of the second (windows "
              f"of {min(60.0, args.duration / 3):.0f} s); fds — descriptors back to the baseline "
              f"within {args.settle} s of the clients stopping; procs — nothing of the run left "
              "alive; slowloris — the header timeout closed the crowd's connections within "
              f"{args.header_timeout} + 5 s."]
    return "\n".join(lines) + "\n", failed_any


def write_samples(path, results):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=SAMPLE_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in results:
            w.writerows(r.get("rows", []))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=600, help="seconds of load per engine")
    ap.add_argument("--engines", default="epoll-et,uring,select")
    ap.add_argument("--idle", type=int, default=10000, help="idle connections held")
    ap.add_argument("--idle-rate", type=float, default=2000,
                    help="the idle holder's connection attempts per second")
    ap.add_argument("--slowloris", type=int, default=300, help="slowloris clients")
    ap.add_argument("--slow-every", type=float, default=3.0,
                    help="seconds between a slowloris client's bytes (jittered +-50%%)")
    ap.add_argument("--rate", type=float, default=5000, help="well-behaved requests per second")
    ap.add_argument("--calls", type=int, default=5, help="keep-alive calls per connection")
    ap.add_argument("--timeout", type=float, default=5, help="evlab load --timeout")
    ap.add_argument("--segment", type=float, default=60, help="seconds per load run")
    ap.add_argument("--header-timeout", type=int, default=10, help="evlab serve --header-timeout")
    ap.add_argument("--interval", type=float, default=2, help="seconds between samples")
    ap.add_argument("--settle", type=float, default=30,
                    help="seconds the descriptors may take to return to the baseline")
    ap.add_argument("--evlab", default=None, help="the evlab binary (default: build this tree's)")
    args = ap.parse_args()
    if args.duration < 3 or args.calls < 1 or args.rate <= 0 or args.idle_rate <= 0:
        sys.exit("--duration must be at least 3 s, --calls at least 1, the rates positive")

    def interrupt(*_):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with it ignored

    if args.evlab:
        binary = os.path.abspath(args.evlab)
        if not os.access(binary, os.X_OK):
            sys.exit(f"--evlab {args.evlab}: not an executable file")
    else:
        try:
            subprocess.run(["cargo", "build", "--release", "-q", "-p", "evlab"], cwd=ROOT, check=True)
        except KeyboardInterrupt:
            sys.exit(130)
        binary = evlab_bin("evlab")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    limit = NOFILE if PRLIMIT else hard  # the server raises its soft limit to the hard one
    need = args.idle + args.slowloris + 1000
    if need > limit:
        sys.exit(f"--idle {args.idle} + --slowloris {args.slowloris} (+1,000 for the load) need "
                 f"{need} descriptors; the limit here is {limit}")
    ok = supported(binary)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    outdir = os.path.join(ROOT, "results", "bench", f"soak-{stamp}")
    os.makedirs(os.path.join(outdir, "load"), exist_ok=True)
    load0 = os.getloadavg()
    results, interrupted = [], False
    try:
        with tempfile.TemporaryDirectory(prefix="evlab-soak-") as tmp:
            docroot, uris = make_fileset(tmp)
            for engine in [e for e in args.engines.split(",") if e]:
                r = {"engine": engine}
                results.append(r)
                if engine not in ok:
                    r["skipped"] = "not supported by this kernel (see the note above)"
                    continue
                try:
                    soak_engine(engine, args, binary, docroot, uris, outdir, r)
                except KeyboardInterrupt:
                    raise
                except Exception as e:  # the engine fails; the next one still runs
                    r["error"] = f"{type(e).__name__}: {e}"
                    print(f"{engine}: FAILED: {r['error']}", file=sys.stderr)
    except KeyboardInterrupt:
        interrupted = True
        print("interrupted: stopping every process", file=sys.stderr)
    finally:
        left = stop_all_groups()
        left += [p for p, _ in leftovers()]
        if left:
            print(f"processes left and killed: {left}", file=sys.stderr)
    write_samples(os.path.join(outdir, "samples.csv"), results)
    text, failed = summary(results, args, stamp, sys.argv[1:], load0, interrupted)
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    print(f"samples: {outdir}/samples.csv")
    sys.exit(130 if interrupted else 1 if failed else 0)


if __name__ == "__main__":
    main()
