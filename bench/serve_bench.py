#!/usr/bin/env python3
"""evlab serve benchmark: requests/s and server CPU per reply against the floor, nginx, lighttpd.

One-byte file, keep-alive, server pinned to CPU 0, `wrk -t1 -c50` pinned to CPU 1. wrk saturates
near 110k requests/s on the reference machine, so requests/s alone cannot separate fast servers:
for each server we also measure the CPU time (user + system, all its processes, from /proc) it
spends per reply. Servers are interleaved over several rounds in one run; medians are reported.
Then the same with 10,000 idle connections held open by `evlab idle` (no requests sent).

Writes results/bench/serve-<timestamp>/{raw.csv,summary.md} and prints the summary.
Usage: bench/serve_bench.py [--rounds 5] [--duration 5] [--idle 10000] [--servers ...]
"""

import argparse
import csv
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (NOFILE, PRLIMIT, ROOT, Server, evlab_bin, free_port,  # noqa: E402
                     hold_idle, make_docroot)

# lighttpd accepts at most half its descriptor limit as connections.
LIGHTTPD_MAX_CONNS = (resource.getrlimit(resource.RLIMIT_NOFILE)[1] if not PRLIMIT else NOFILE) // 2


def nginx_argv(tmp, docroot, port):
    conf = os.path.join(tmp, f"nginx-{port}.conf")
    with open(conf, "w") as f:
        f.write(f"""
worker_processes 1;
worker_rlimit_nofile 40000;
daemon off;
pid {tmp}/nginx-{port}.pid;
error_log {tmp}/nginx-error.log error;
events {{ worker_connections 30000; use epoll; }}
http {{
    access_log off;
    sendfile on;
    keepalive_requests 100000000;
    keepalive_timeout 600s;
    open_file_cache max=1000 inactive=600s;
    open_file_cache_valid 600s;
    client_body_temp_path {tmp}/nb; proxy_temp_path {tmp}/np; fastcgi_temp_path {tmp}/nf;
    uwsgi_temp_path {tmp}/nu; scgi_temp_path {tmp}/ns;
    default_type application/octet-stream;
    server {{ listen 127.0.0.1:{port} backlog=4096; root {docroot}; }}
}}
""")
    return ["nginx", "-p", tmp, "-c", conf]


def lighttpd_argv(tmp, docroot, port, handler="linux-sysepoll"):
    conf = os.path.join(tmp, f"lighttpd-{port}.conf")
    with open(conf, "w") as f:
        f.write(f"""
server.document-root = "{docroot}"
server.bind = "127.0.0.1"
server.port = {port}
server.event-handler = "{handler}"
server.max-fds = 40000
server.max-connections = 30000
server.max-keep-alive-requests = 100000000
server.max-keep-alive-idle = 600
server.max-read-idle = 600
server.errorlog = "{tmp}/lighttpd-error.log"
server.listen-backlog = 4096
""")
    return ["lighttpd", "-D", "-f", conf]


# `--evlab PATH`: an evlab binary built from another revision, run as `evlab-before-<mechanism>`
# beside this tree's in the same interleaved rounds (a before/after comparison in one run).
EVLAB_BEFORE = None


def start(name, tmp, docroot):
    port = free_port()
    if name == "floor":
        return Server(name, [evlab_bin("examples/floor"), f"127.0.0.1:{port}"], port)
    if name.startswith("evlab-before-"):
        mech = name[len("evlab-before-"):]
        return Server(name, [EVLAB_BEFORE, "serve", "--listen", f"127.0.0.1:{port}",
                             "--root", docroot, "--mechanism", mech], port)
    if name.startswith("evlab-"):
        mech = name[len("evlab-"):]
        return Server(name, [evlab_bin("evlab"), "serve", "--listen", f"127.0.0.1:{port}",
                             "--root", docroot, "--mechanism", mech], port)
    if name == "nginx":
        return Server(name, nginx_argv(tmp, docroot, port), port, cwd=tmp)
    if name.startswith("lighttpd"):
        handler = name.split(":", 1)[1] if ":" in name else "linux-sysepoll"
        return Server(name, lighttpd_argv(tmp, docroot, port, handler), port)
    raise ValueError(name)


def wrk(port, duration, conns):
    cmd = ["taskset", "-c", "1", "wrk", "-t1", f"-c{conns}", f"-d{duration}s",
           f"http://127.0.0.1:{port}/one"]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 30)
    elapsed = time.time() - t0
    out = p.stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    reqs = int(re.search(r"(\d+) requests in", out).group(1))
    errs = re.search(r"Socket errors:.*", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rps, reqs, elapsed, (errs.group(0) if errs else ""), int(non2xx.group(1)) if non2xx else 0


def client_cpu_note():
    return "wrk runs alone on CPU 1; at ~100% of it the client, not the server, is the limit"


def idle_for(name, idle, conns):
    """lighttpd cannot hold more than half its descriptor limit: leave room for the load."""
    if name.startswith("lighttpd") and idle + conns + 50 > LIGHTTPD_MAX_CONNS:
        return max(LIGHTTPD_MAX_CONNS - conns - 50, 0)
    return idle


def measure(name, tmp, docroot, duration, conns, idle):
    idle = idle_for(name, idle, conns)
    s = start(name, tmp, docroot)
    try:
        with hold_idle(s.port, idle):
            wrk(s.port, 1, conns)  # warm-up: caches, page faults, connection setup
            c0 = s.cpu()
            rps, reqs, elapsed, errs, non2xx = wrk(s.port, duration, conns)
            c1 = s.cpu()
            if non2xx:
                raise RuntimeError(f"{non2xx} of {reqs} replies were not 2xx/3xx: not a valid point")
            return dict(server=name, idle=idle, rps=rps, requests=reqs,
                        cpu_s=c1 - c0, us_per_reply=(c1 - c0) / max(reqs, 1) * 1e6,
                        errors=errs, non2xx=non2xx)
    finally:
        s.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--conns", type=int, default=50)
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--servers", default="floor,evlab-epoll-et,nginx,lighttpd")
    ap.add_argument("--evlab", default=None,
                    help="another evlab binary to measure beside this tree's, as server 'evlab-before-epoll-et'")
    ap.add_argument("--idle-servers", default="evlab-epoll-et,evlab-select,evlab-poll,nginx,lighttpd")
    args = ap.parse_args()
    global EVLAB_BEFORE
    if args.evlab:
        EVLAB_BEFORE = os.path.abspath(args.evlab)
        if not os.access(EVLAB_BEFORE, os.X_OK):
            sys.exit(f"--evlab {args.evlab}: not an executable file")

    subprocess.run(["cargo", "build", "--release", "-q", "-p", "evlab",
                    "-p", "evlab-server", "--examples", "--bins"], cwd=ROOT, check=True)
    servers = [s for s in args.servers.split(",") if s]
    idle_servers = [s for s in args.idle_servers.split(",") if s] if args.idle else []
    for tool in ["wrk", "taskset"]:
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed: run scripts/setup.sh")
    for peer in ["nginx", "lighttpd"]:
        if not shutil.which(peer):
            print(f"note: {peer} not installed; skipping it", file=sys.stderr)
            servers = [s for s in servers if not s.startswith(peer)]
            idle_servers = [s for s in idle_servers if not s.startswith(peer)]

    stamp = time.strftime("%Y%m%d-%H%M%S")
    outdir = os.path.join(ROOT, "results", "bench", f"serve-{stamp}")
    os.makedirs(outdir, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="evlab-bench-") as tmp:
        docroot = make_docroot(tmp)
        plan = [(s, 0) for s in servers] + [(s, 0) for s in idle_servers if s not in servers] \
            + [(s, args.idle) for s in idle_servers]
        for r in range(args.rounds):
            for name, idle in plan:
                try:
                    row = measure(name, tmp, docroot, args.duration, args.conns, idle)
                except Exception as e:  # a failed point is reported, the run goes on
                    print(f"round {r + 1}: {name} idle={idle}: FAILED: {e}", file=sys.stderr)
                    continue
                row["round"] = r + 1
                rows.append(row)
                print(f"round {r + 1}: {name:<18} idle={idle:<6} {row['rps']:>10.0f} req/s "
                      f"{row['us_per_reply']:>7.2f} us CPU/reply {row['errors']}", file=sys.stderr)

    with open(os.path.join(outdir, "raw.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["round", "server", "idle", "rps", "requests", "cpu_s",
                                          "us_per_reply", "errors", "non2xx"])
        w.writeheader()
        w.writerows(rows)

    def med(name, idle, key):
        v = [r[key] for r in rows if r["server"] == name and r["idle"] == idle]
        return statistics.median(v) if v else float("nan")

    uname = os.uname()
    lines = [f"# evlab serve benchmark ({stamp})", "",
             f"Machine: {uname.sysname} {uname.release}, {os.cpu_count()} CPUs. Server on CPU 0, "
             f"`wrk -t1 -c{args.conns} -d{args.duration}s` on CPU 1; {args.rounds} interleaved rounds, medians.",
             f"Command: `bench/serve_bench.py --rounds {args.rounds} --duration {args.duration} "
             f"--conns {args.conns} --idle {args.idle}`", "",
             "| server | req/s | CPU µs/reply | req/s with %d idle | kept |" % args.idle,
             "|---|---:|---:|---:|---:|"]
    for name in dict.fromkeys(servers + idle_servers):
        a, c = med(name, 0, "rps"), med(name, 0, "us_per_reply")
        real_idle = idle_for(name, args.idle, args.conns)
        b = med(name, real_idle, "rps") if args.idle and name in idle_servers else float("nan")
        if real_idle != args.idle and b == b:
            name = f"{name} (only {real_idle} idle: at most {LIGHTTPD_MAX_CONNS} connections)"
        kept = f"{100 * b / a:.0f}%" if a == a and b == b else ""
        lines.append(f"| {name} | {a:,.0f} | {c:.2f} | {'' if b != b else f'{b:,.0f}'} | {kept} |")
    lines.append("")
    if "floor" in servers and "evlab-epoll-et" in servers:
        lines.append(f"- evlab epoll-et / floor (req/s): {med('evlab-epoll-et', 0, 'rps') / med('floor', 0, 'rps'):.3f}")
        lines.append(f"- evlab epoll-et / floor (CPU per reply): {med('evlab-epoll-et', 0, 'us_per_reply') / med('floor', 0, 'us_per_reply'):.3f}")
    if "evlab-before-epoll-et" in servers and "evlab-epoll-et" in servers:
        lines.append(f"- evlab epoll-et / the --evlab binary's (CPU per reply): {med('evlab-epoll-et', 0, 'us_per_reply') / med('evlab-before-epoll-et', 0, 'us_per_reply'):.3f}")
    if "nginx" in servers and "evlab-epoll-et" in servers:
        lines.append(f"- evlab epoll-et / nginx (req/s): {med('evlab-epoll-et', 0, 'rps') / med('nginx', 0, 'rps'):.3f}")
        lines.append(f"- evlab epoll-et / nginx (CPU per reply): {med('evlab-epoll-et', 0, 'us_per_reply') / med('nginx', 0, 'us_per_reply'):.3f}")
    if "lighttpd" in servers and "evlab-epoll-et" in servers:
        lines.append(f"- evlab epoll-et / lighttpd (CPU per reply): {med('evlab-epoll-et', 0, 'us_per_reply') / med('lighttpd', 0, 'us_per_reply'):.3f}")
    lines.append(f"- {client_cpu_note()}")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    print(f"raw data: {outdir}/raw.csv")


if __name__ == "__main__":
    main()
