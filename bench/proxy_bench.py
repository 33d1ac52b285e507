#!/usr/bin/env python3
"""evlab proxy against nginx proxy_pass and HAProxy: proxy CPU time per request.

Every configuration proxies the same origin (`evlab serve`, epoll-et) for the same load
generator (`evlab load`, keep-alive connections at a fixed request rate), with its cache off:
evlab proxy on each engine (--engines) in each forwarding mode (--modes), nginx proxy_pass (kept
upstream connections, one worker) and HAProxy (HTTP mode, `option splice-auto`, one thread), at
16 KiB objects (where copying is expected to be cheapest) and 1 MiB objects (where splicing
is), by default. The proxy runs alone on CPU 0; the load generator and the origin share CPU 1.

CPU per request: the proxy's CPU time (every thread of every process of its tree, from
/proc/PID/task/TID/schedstat, in nanoseconds) over the measured load, divided by the 2xx replies.
A point is kept only if the client side kept up: no errors, only 2xx replies, at least 97% of
the offered request rate answered, under 1% late starts, and CPU 1 (client and origin) under 90%
busy with the client under 80% of one CPU (else the client, not the proxy, could set the pace).

Rounds are interleaved: each round visits every (size, configuration) once. The sizes come in
an order rotated by one each round, and within a size the configurations too, so that over an
even number of rounds each configuration of a size runs first, second, ... equally often (with
two configurations, each runs first in every other round) and a drift of the machine, or
whatever one point leaves behind for the next, falls on all of them alike. (Until 2026-11-28
the whole list of points was rotated instead: with two sizes of two configurations, epoll-et ran
before uring at the same size in three rounds of four.) Per
configuration the table gives the mean over rounds and its 90% interval (Student t with n - 1
degrees of freedom), and per size the ratio of evlab's best configuration (lowest mean) to
HAProxy's and to nginx's, with whether the upper end of evlab's interval is at or below
HAProxy's mean.

Paired against epoll-et: per size, each other evlab engine is compared with epoll-et in the
same forwarding mode round by round (the two points of one round, both valid, make a pair: they
ran minutes apart at most, so a drift of the machine cancels). The table gives the geometric
mean of the per-round ratios (engine / epoll-et, CPU per request) and its 90% interval (Student t
on the logarithms), and the verdict on "no slower than epoll-et" with a non-inferiority margin
(--margin, default 1.05, fixed before a run): met if the interval's upper end is at or below the
margin, not met if its lower end is above it, inconclusive otherwise. Whether the engine is
measurably slower at all (the lower end above 1) is said apart.

The floor (--pattern): bench/uring_pattern.c, built with cc and liburing, in its proxy form,
as two more configurations ("pattern epoll-et copy" and "pattern uring copy"): each pattern alone
as an HTTP proxy (every transfer of the uring one in the ring, evlab proxy's ring and waits),
through the same load, origin and accounting, paired with its own epoll-et the same way. What
io_uring itself costs against epoll on this machine, without the rest of evlab proxy: a lower
bound for what any completion engine of this design can reach here.

Writes results/bench/proxy-<timestamp>/{raw.csv,summary.md} and prints the summary.
Quick smoke run: bench/proxy_bench.py --rounds 2 --duration 1 (numbers from it mean nothing).
"""

import argparse
import csv
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (NOFILE, PRLIMIT, ROOT, evlab_bin, free_port, leftovers, proc_tree,  # noqa: E402
                     size_bytes, spawn_group, start_origin, stop_all_groups, stop_group,
                     supported, wait_port)

PROXY_CPU, CLIENT_CPU = "0", "1"
# Two-sided 90% Student t quantiles (t at 0.95) by degrees of freedom; 1.645 beyond 30.
T90 = [None, 6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782,
       1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708,
       1.706, 1.703, 1.701, 1.699, 1.697]


def size_label(n):
    for unit, mult in (("M", 1 << 20), ("K", 1024)):
        if n % mult == 0:
            return f"{n // mult}{unit}"
    return f"{n} B"


def interval(v):
    """(mean, half-width of the 90% interval); the half-width is nan for one value."""
    m = statistics.fmean(v)
    if len(v) < 2:
        return m, float("nan")
    df = len(v) - 1
    t = T90[df] if df < len(T90) else 1.645
    return m, t * statistics.stdev(v) / math.sqrt(len(v))


# ---- /proc ----

def cpu_ns(pid):
    """CPU time of pid's whole tree, every thread, in ns (schedstat's first field), and the
    part of it spent in io_uring's worker threads (io-wq, `iou-wrk-*`: where the kernel runs
    requests it cannot complete inline, such as every splice and tee)."""
    total = iowq = 0
    for p in proc_tree(pid):
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tids:
            try:
                with open(f"/proc/{p}/task/{t}/schedstat") as f:
                    ns = int(f.read().split()[0])
                total += ns
                with open(f"/proc/{p}/task/{t}/comm") as f:
                    if f.read().startswith("iou-wrk"):
                        iowq += ns
            except (OSError, ValueError, IndexError):
                pass
    return total, iowq


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def cpu_times(cpu):
    """(busy, total) jiffies of one CPU from /proc/stat."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{cpu} "):
                v = [int(x) for x in line.split()[1:]]
                idle = v[3] + (v[4] if len(v) > 4 else 0)
                return sum(v[:8]) - idle, sum(v[:8])
    raise RuntimeError(f"no cpu{cpu} in /proc/stat")


# ---- the proxies ----

def nginx_argv(tmp, origin_port, port):
    # As the lab's nginx proxy peer (crates/lab/src/run/peers.rs, nginx_proxy_argv).
    conf = os.path.join(tmp, f"nginx-{port}.conf")
    with open(conf, "w") as f:
        f.write(f"""worker_processes 1;
worker_rlimit_nofile 40000;
daemon off;
pid {tmp}/nginx-{port}.pid;
error_log {tmp}/nginx-error.log error;
events {{ worker_connections 30000; use epoll; }}
http {{
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 600s;
  client_body_temp_path {tmp}/nb; proxy_temp_path {tmp}/np;
  fastcgi_temp_path {tmp}/nf; uwsgi_temp_path {tmp}/nu; scgi_temp_path {tmp}/ns;
  upstream origin {{ server 127.0.0.1:{origin_port}; keepalive 64; }}
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    location / {{
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_max_temp_file_size 0;
    }}
  }}
}}
""")
    return ["nginx", "-p", tmp, "-c", conf]


def haproxy_maxconn():
    # As the lab's (peers::haproxy_maxconn): 20,000, or what the descriptor limit holds beside
    # the pipes' descriptors.
    hard = NOFILE if PRLIMIT else resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY:
        hard = NOFILE
    return min(20000, hard - 2 * 2048 - 256)


def haproxy_argv(tmp, origin_port, port):
    # As the lab's HAProxy peer (crates/lab/src/run/peers.rs, haproxy_argv).
    maxconn = haproxy_maxconn()
    conf = os.path.join(tmp, f"haproxy-{port}.cfg")
    with open(conf, "w") as f:
        f.write(f"""# No `log` line: nothing is logged.
global
    nbthread 1
    no strict-limits
    maxconn {maxconn}
    maxpipes 2048

defaults
    mode http
    maxconn {maxconn}
    option splice-auto
    option http-keep-alive
    http-reuse always
    timeout connect 10s
    timeout client 600s
    timeout server 600s
    timeout http-request 600s
    timeout http-keep-alive 600s

frontend measured
    bind 127.0.0.1:{port} backlog 4096
    default_backend origin

backend origin
    server origin 127.0.0.1:{origin_port} pool-max-conn 64 pool-purge-delay 600s
""")
    return ["haproxy", "-db", "-f", conf]


def proxy_argv(name, tmp, origin_port, port, evlab, size, pattern):
    if name.startswith("pattern "):
        return [pattern, "proxy", name.split(" ")[1], str(port), str(origin_port), str(size)]
    if name == "nginx":
        return nginx_argv(tmp, origin_port, port)
    if name == "haproxy":
        return haproxy_argv(tmp, origin_port, port)
    _, engine, mode = name.split(" ")
    return [evlab, "proxy", "--listen", f"127.0.0.1:{port}", "--origin",
            f"127.0.0.1:{origin_port}", "--mechanism", engine, "--forward", mode,
            "--cache-bytes", "0"]


def answers(port, path, timeout=10):
    t0 = time.time()
    last = None
    while time.time() - t0 < timeout:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
                r.read()
                if r.status == 200:
                    return
                last = r.status
        except OSError as e:
            last = e
        time.sleep(0.05)
    raise RuntimeError(f"no 200 for {path} on port {port} within {timeout} s ({last})")


class Proxy:
    def __init__(self, name, tmp, origin_port, args, size):
        self.name, self.port = name, free_port()
        argv = proxy_argv(name, tmp, origin_port, self.port, args.evlab, size, args.pattern)
        self.log = open(os.path.join(tmp, f"proxy-{self.port}.err"), "w")
        self.proc = spawn_group(PRLIMIT + ["taskset", "-c", PROXY_CPU] + argv,
                                stdout=subprocess.DEVNULL, stderr=self.log, cwd=tmp)
        if not wait_port(self.port):
            self.stop()
            raise RuntimeError(f"{name} did not listen: {' '.join(argv)}")

    def stop(self):
        left = stop_group(self.proc)
        self.log.close()
        if left:
            raise RuntimeError(f"{self.name} left processes {left}")


# ---- the load ----

def load(evlab, port, path, rps, calls, duration, timeout=5):
    argv = ["taskset", "-c", CLIENT_CPU, evlab, "load", "--server", "127.0.0.1", "--port",
            str(port), "--uri", path, "--rate", f"{rps / calls:g}", "--num-calls", str(calls),
            "--duration", str(duration), "--timeout", str(timeout), "--json", "-", "--quiet"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=duration + timeout + 60)
    if p.returncode != 0:
        raise RuntimeError(f"evlab load failed ({p.returncode}): {p.stderr.strip()[-300:]}")
    return json.loads(p.stdout)


def rotated(xs, k):
    k %= max(len(xs), 1)
    return xs[k:] + xs[:k]


def round_order(points, configs, r):
    """Round r's (size, rate, configuration) in order: the sizes rotated by r, and within each
    size the configurations rotated by r, so that each configuration of a size holds each
    position equally often over len(configs) rounds."""
    return [(size, rate, c) for size, rate in rotated(points, r) for c in rotated(configs, r)]


def measure(name, size, rps, args, tmp, origin_port):
    path = f"/o{size}"
    px = Proxy(name, tmp, origin_port, args, size)
    try:
        answers(px.port, path)
        if args.warmup > 0:
            load(args.evlab, px.port, path, rps, args.calls, args.warmup)
        (c0, w0), b0 = cpu_ns(px.proc.pid), cpu_times(CLIENT_CPU)
        r = load(args.evlab, px.port, path, rps, args.calls, args.duration)
        (c1, w1), b1 = cpu_ns(px.proc.pid), cpu_times(CLIENT_CPU)
    finally:
        px.stop()
    ok = r["replies"]["status"]["2xx"]
    busy = (b1[0] - b0[0]) / max(b1[1] - b0[1], 1)
    offered = r["schedule"]["offered_rate"] * args.calls
    row = dict(size=size, config=name, rps_offered=rps, replies_2xx=ok,
               reply_rate=ok / max(r["duration_s"], 1e-9), errors=r["errors"]["total"],
               non_2xx=r["replies"]["total"] - ok, late=r["late_starts"]["count"],
               client_cpu_pct=r["cpu"]["percent"], cpu1_busy_pct=100 * busy,
               proxy_cpu_s=(c1 - c0) / 1e9, us_per_req=(c1 - c0) / 1e3 / max(ok, 1),
               iowq_us_per_req=(w1 - w0) / 1e3 / max(ok, 1), loadavg=loadavg())
    why = []
    if row["errors"] or row["non_2xx"]:
        why.append(f"{row['errors']} errors, {row['non_2xx']} non-2xx")
    if ok < 0.97 * offered * r["duration_s"]:
        why.append(f"answered {row['reply_rate']:.0f}/s of {offered:.0f}/s offered")
    if row["late"] > 0.01 * max(r["connections"]["initiated"], 1):
        why.append(f"{row['late']} late starts")
    if busy >= 0.90 or row["client_cpu_pct"] >= 80:
        why.append(f"client side saturated (CPU {CLIENT_CPU} {100 * busy:.0f}% busy, "
                   f"client {row['client_cpu_pct']:.0f}% of a CPU)")
    row["invalid"] = "; ".join(why)
    return row


def paired(rows, size, name, base):
    """The per-round ratios name / base at `size` over the rounds where both points are valid."""
    by_round = {}
    for x in rows:
        if x["size"] == size and x["config"] in (name, base) and not x["invalid"]:
            by_round.setdefault(x["round"], {})[x["config"]] = x["us_per_req"]
    return [v[name] / v[base] for _, v in sorted(by_round.items())
            if name in v and base in v and v[base] > 0]


def verdict(lo, hi, margin):
    if hi <= margin:
        return "met"
    if lo > margin:
        return "not met"
    return "inconclusive"


def paired_lines(rows, sizes, configs, margin):
    """The paired comparison of every evlab engine (and the uring pattern) with epoll-et in the
    same mode."""
    out = []
    for size in sizes:
        for name in configs:
            parts = name.split(" ")
            if len(parts) != 3 or parts[0] not in ("evlab", "pattern") or parts[1] == "epoll-et":
                continue
            base = f"{parts[0]} epoll-et {parts[2]}"
            if base not in configs:
                continue
            r = paired(rows, size, name, base)
            if not out:
                out = ["", f"Paired against epoll-et in the same mode, round by round: the "
                       f"geometric mean of the ratios (CPU per request) and its 90% interval; "
                       f"\"no slower\" is met if the upper end is at or below {margin:g}, not "
                       f"met if the lower end is above it.", "",
                       "| size | configuration | pairs | ratio | 90% interval | no slower "
                       f"(margin {margin:g}) | measurably slower |",
                       "|---:|---|---:|---:|---|---|---|"]
            if len(r) < 2:
                out.append(f"| {size_label(size)} | {name} | {len(r)} | | | too few pairs | |")
                continue
            m, h = interval([math.log(x) for x in r])
            lo, hi = math.exp(m - h), math.exp(m + h)
            out.append(f"| {size_label(size)} | {name} | {len(r)} | {math.exp(m):.3f} | "
                       f"{lo:.3f} – {hi:.3f} | {verdict(lo, hi, margin)} | "
                       f"{'yes' if lo > 1 else 'no'} |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--duration", type=float, default=10, help="seconds of measured load per point (default 10)")
    ap.add_argument("--warmup", type=float, default=1, help="seconds of load before measuring (default 1)")
    ap.add_argument("--sizes", default="16K,1M", help="object sizes (default 16K,1M)")
    ap.add_argument("--rates", default="4000,200",
                    help="offered requests/s, one per size (default 4000,200)")
    ap.add_argument("--calls", type=int, default=10, help="requests per connection (default 10)")
    ap.add_argument("--engines", default="epoll-et,uring-poll,uring",
                    help="evlab proxy mechanisms (those this kernel lacks are left out)")
    ap.add_argument("--modes", default="copy,splice",
                    help="evlab forwarding modes (default copy,splice: with the cache off, "
                         "splice-keep tees nothing and moves bodies as splice does)")
    ap.add_argument("--peers", default="nginx,haproxy", help="peer proxies (default nginx,haproxy)")
    ap.add_argument("--margin", type=float, default=1.05,
                    help="non-inferiority margin of the paired ratios to epoll-et (default 1.05)")
    ap.add_argument("--pattern", action="store_true",
                    help="also measure bench/uring_pattern.c's epoll-et and uring patterns as "
                         "proxies (the floor; needs cc and liburing-dev)")
    ap.add_argument("--evlab", default=None, help="the evlab binary (default: this tree's "
                                                  "release build, built first)")
    args = ap.parse_args()
    if args.rounds < 1 or args.duration <= 0:
        sys.exit("--rounds must be at least 1 and --duration above 0")
    if not args.margin >= 1:
        sys.exit("--margin must be at least 1")
    sizes = [size_bytes(s) for s in args.sizes.split(",") if s]
    rates = [float(r) for r in args.rates.split(",") if r]
    if len(rates) != len(sizes):
        sys.exit(f"--rates gives {len(rates)} rates for {len(sizes)} sizes")
    if args.evlab:
        args.evlab = os.path.abspath(args.evlab)
    else:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "evlab", "--bins"], cwd=ROOT,
                       check=True)
        args.evlab = evlab_bin("evlab")
    if not os.access(args.evlab, os.X_OK):
        sys.exit(f"{args.evlab}: not an executable file")
    if not shutil.which("taskset"):
        sys.exit("taskset is not installed: run scripts/setup.sh")
    if (os.cpu_count() or 1) < 2:
        sys.exit("needs two CPUs: the proxy on CPU 0, the client and origin on CPU 1")

    ok = supported(args.evlab)
    if args.pattern and "uring" not in ok:
        sys.exit("--pattern: this kernel does not run evlab's uring engine")
    configs = [f"evlab {e} {m}" for e in args.engines.split(",") if e
               for m in args.modes.split(",") if m if e in ok]
    if args.pattern:
        configs += ["pattern epoll-et copy", "pattern uring copy"]
    for peer in [p for p in args.peers.split(",") if p]:
        if shutil.which(peer) or os.path.exists(f"/usr/sbin/{peer}"):
            configs.append(peer)
        else:
            print(f"note: {peer} is not installed (scripts/setup.sh installs it); left out",
                  file=sys.stderr)
    points = list(zip(sizes, rates))

    stamp = time.strftime("%Y%m%d-%H%M%S")
    outdir = os.path.join(ROOT, "results", "bench", f"proxy-{stamp}")
    os.makedirs(outdir, exist_ok=True)
    rows = []
    load_start = loadavg()
    with tempfile.TemporaryDirectory(prefix="evlab-proxy-bench-") as tmp:
        os.chmod(tmp, 0o755)
        if args.pattern:
            args.pattern = os.path.join(tmp, "uring_pattern")
            cc = subprocess.run(["cc", "-O2", "-o", args.pattern,
                                 os.path.join(ROOT, "bench", "uring_pattern.c"), "-luring",
                                 "-lpthread"], capture_output=True, text=True)
            if cc.returncode:
                sys.exit("--pattern: cannot build bench/uring_pattern.c (scripts/setup.sh "
                         f"installs cc and liburing-dev): {cc.stderr.strip()[-300:]}")
        www = os.path.join(tmp, "www")
        os.makedirs(www)
        for size in sizes:
            with open(os.path.join(www, f"o{size}"), "wb") as f:
                f.write(os.urandom(size))
        origin, origin_port = start_origin(args.evlab, www, CLIENT_CPU)
        try:
            answers(origin_port, f"/o{sizes[0]}")
            for r in range(args.rounds):
                for size, rate, name in round_order(points, configs, r):
                    try:
                        row = measure(name, size, rate, args, tmp, origin_port)
                    except Exception as e:  # a failed point is reported, the run goes on
                        print(f"round {r + 1}: {size_label(size)} {name}: FAILED: {e}",
                              file=sys.stderr)
                        continue
                    row["round"] = r + 1
                    rows.append(row)
                    print(f"round {r + 1}: {size_label(size):>4} {name:<24} {row['us_per_req']:8.1f} us/req "
                          f"{row['reply_rate']:7.0f} req/s client {row['client_cpu_pct']:3.0f}% "
                          f"cpu{CLIENT_CPU} {row['cpu1_busy_pct']:3.0f}%"
                          + (f"  INVALID: {row['invalid']}" if row["invalid"] else ""),
                          file=sys.stderr)
        finally:
            stop_group(origin)
            stop_all_groups()
    left = leftovers()
    if left:
        print(f"warning: processes left: {left}", file=sys.stderr)

    fields = ["round", "size", "config", "rps_offered", "replies_2xx", "reply_rate", "errors",
              "non_2xx", "late", "client_cpu_pct", "cpu1_busy_pct", "proxy_cpu_s", "us_per_req",
              "iowq_us_per_req", "loadavg", "invalid"]
    with open(os.path.join(outdir, "raw.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)

    uname = os.uname()
    cmd = " ".join(["bench/proxy_bench.py"] + sys.argv[1:])
    lines = [f"# evlab proxy benchmark ({stamp})", "",
             f"Machine: {uname.sysname} {uname.release}, {os.cpu_count()} CPUs. Proxy on CPU "
             f"{PROXY_CPU}; `evlab load` ({args.calls} requests per connection) and the origin "
             f"(`evlab serve`, epoll-et) on CPU {CLIENT_CPU}. Cache off. {args.rounds} "
             f"interleaved rounds of {args.duration:g} s (after {args.warmup:g} s of warm-up).",
             f"Command: `{cmd}`", "",
             "Proxy CPU µs per request: mean over the valid rounds and its 90% interval "
             "(Student t).", "",
             "| size | configuration | offered req/s | valid rounds | CPU µs/request | 90% interval |",
             "|---:|---|---:|---:|---:|---|"]
    summary = {}
    for size, rate in zip(sizes, rates):
        for name in configs:
            v = [x["us_per_req"] for x in rows
                 if x["size"] == size and x["config"] == name and not x["invalid"]]
            if not v:
                lines.append(f"| {size_label(size)} | {name} | {rate:g} | 0 | | |")
                continue
            m, h = interval(v)
            summary[(size, name)] = (m, h, len(v))
            iv = f"{m - h:.1f} – {m + h:.1f}" if h == h else "(one round)"
            lines.append(f"| {size_label(size)} | {name} | {rate:g} | {len(v)} | {m:.1f} | {iv} |")
    lines.append("")
    for size in sizes:
        ev = [(summary[(size, c)], c) for c in configs
              if c.startswith("evlab ") and (size, c) in summary]
        if not ev:
            continue
        (m, h, n), best = min(ev)
        for peer in ("haproxy", "nginx"):
            if (size, peer) not in summary:
                continue
            pm = summary[(size, peer)][0]
            line = (f"- {size_label(size)}: evlab's best ({best}, {m:.1f} µs) / {peer} ({pm:.1f} µs) = "
                    f"{m / pm:.2f}")
            if peer == "haproxy" and h == h:
                verdict = "yes" if m + h <= pm else "no"
                line += (f"; the upper end of evlab's 90% interval ({m + h:.1f}) at or below "
                         f"HAProxy's mean: {verdict}")
            lines.append(line)
    invalid = [x for x in rows if x["invalid"]]
    if invalid:
        lines.append(f"- {len(invalid)} point(s) left out as invalid (raw.csv says why).")
    # On a machine others use too, the client-side checks may leave little; the interleaved
    # comparison still holds for every round that answered correctly, shown apart.
    lines += ["", "Every round without errors or non-2xx replies, valid or not (the client-side "
              "checks aside): proxy CPU µs per request, min / median / max over those rounds; "
              "the median of the part spent in io_uring's worker threads (io-wq); the median's "
              "ratio to epoll-et's in the same mode.", "",
              "| size | configuration | rounds | min | median | max | of which io-wq (median) "
              "| / epoll-et |", "|---:|---|---:|---:|---:|---:|---:|---:|"]
    med = {}
    for size in sizes:
        for name in configs:
            v = [x for x in rows if x["size"] == size and x["config"] == name
                 and not x["errors"] and not x["non_2xx"]]
            if v:
                med[(size, name)] = statistics.median(x["us_per_req"] for x in v)
    for size in sizes:
        for name in configs:
            v = [x for x in rows if x["size"] == size and x["config"] == name
                 and not x["errors"] and not x["non_2xx"]]
            if not v:
                continue
            us = [x["us_per_req"] for x in v]
            wq = statistics.median(x["iowq_us_per_req"] for x in v)
            base = None
            if name.startswith(("evlab ", "pattern ")):
                prog, _, mode = name.split(" ")
                base = med.get((size, f"{prog} epoll-et {mode}"))
            ratio = f"{med[(size, name)] / base:.2f}" if base else ""
            lines.append(f"| {size_label(size)} | {name} | {len(v)} | {min(us):.1f} | "
                         f"{statistics.median(us):.1f} | {max(us):.1f} | {wq:.1f} | {ratio} |")
    lines += paired_lines(rows, sizes, configs, args.margin)
    lines += ["", f"Load average (1, 5, 15 min) at the start: {load_start}; at the end: "
              f"{loadavg()}."]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    print(f"raw data: {outdir}/raw.csv")


if __name__ == "__main__":
    main()
