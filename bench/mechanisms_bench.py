#!/usr/bin/env python3
"""Every evlab mechanism on the one-byte workload: rate, server CPU per reply, and what the
server's own stats say about syscalls — the paper's questions (do fewer epoll_ctl calls pay? does
io_uring?) answered on this kernel.

Two loads, each with the server pinned to CPU 0 and the client to CPU 1:
  keep-alive      wrk -t1 -c50 -d{duration}s                 (many requests per connection)
  per-connection  ab -c 50 -n {conns} (HTTP/1.0, no keep-alive: one request per connection)
Optionally also keep-alive with N idle connections held by `evlab idle` (--idle N).
Servers are interleaved over --rounds rounds; medians reported. Writes
results/bench/mechanisms-<timestamp>/{raw.csv,summary.md}.
"""

import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (ROOT, Server, evlab_bin, free_port, hold_idle, make_docroot,  # noqa: E402
                     stats, supported)

MECHS = ["select", "poll", "epoll-lt", "epoll-ctlv", "epoll2", "epoll-et", "uring-poll", "uring"]



def run_load(kind, port, args):
    if kind == "per-connection":
        cmd = ["taskset", "-c", "1", "ab", "-q", "-c", "50", "-n", str(args.conns), "-s", "10",
               f"http://127.0.0.1:{port}/one"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300).stdout
        rps = float(re.search(r"Requests per second:\s+([\d.]+)", out).group(1))
        failed = int(re.search(r"Failed requests:\s+(\d+)", out).group(1))
        return rps, failed
    cmd = ["taskset", "-c", "1", "wrk", "-t1", "-c50", f"-d{args.duration}s",
           f"http://127.0.0.1:{port}/one"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.duration + 60).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return rps, 1 if ("Socket errors" in out or "Non-2xx" in out) else 0


def measure(mech, kind, idle, docroot, args):
    port = free_port()
    s = Server(mech, [evlab_bin("evlab"), "serve", "--listen", f"127.0.0.1:{port}", "--root",
                      docroot, "--mechanism", mech, "--stats"], port)
    try:
        with hold_idle(port, idle):
            before = stats(port)
            c0 = s.cpu()
            rps, failed = run_load(kind, port, args)
            c1 = s.cpu()
            if failed:
                raise RuntimeError("the client saw failed or non-2xx replies: not a valid point")
            after = stats(port)
            req = after["requests"] - before["requests"] - 1  # the first stats request
            sc = {k: v["calls"] - before["syscalls"].get(k, {}).get("calls", 0)
                  for k, v in after["syscalls"].items()}
            ev_b, ev_a = before["events"], after["events"]
            waits = ev_a["waits"] - ev_b["waits"]
            mem = ev_a["waits_from_memory"] - ev_b["waits_from_memory"]
            row = dict(mechanism=mech, load=kind, idle=idle, rps=rps, failed=failed, replies=req,
                       us_per_reply=(c1 - c0) / max(req, 1) * 1e6,
                       syscalls_per_reply=sum(sc.values()) / max(req, 1),
                       epoll_ctl_per_reply=sc.get("epoll_ctl", 0) / max(req, 1),
                       enter_per_reply=sc.get("io_uring_enter", 0) / max(req, 1),
                       waits_per_reply=waits / max(req, 1),
                       waits_from_memory=(mem / waits) if waits else 0.0,
                       discarded_per_reply=(ev_a["discarded"] - ev_b["discarded"]) / max(req, 1))
            return row
    finally:
        s.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=4)
    ap.add_argument("--conns", type=int, default=20000)
    ap.add_argument("--idle", type=int, default=0)
    ap.add_argument("--mechanisms", default=",".join(MECHS))
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "evlab"], cwd=ROOT, check=True)
    ok = supported()
    mechs = [m for m in args.mechanisms.split(",") if m in ok]
    loads = [("keep-alive", 0), ("per-connection", 0)] + ([("keep-alive", args.idle)] if args.idle else [])
    rows = []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    outdir = os.path.join(ROOT, "results", "bench", f"mechanisms-{stamp}")
    os.makedirs(outdir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="evlab-mech-") as tmp:
        docroot = make_docroot(tmp)
        for r in range(args.rounds):
            for kind, idle in loads:
                for m in mechs:
                    try:
                        row = measure(m, kind, idle, docroot, args)
                    except Exception as e:
                        print(f"round {r + 1} {m} {kind} idle={idle}: FAILED: {e}", file=sys.stderr)
                        continue
                    row["round"] = r + 1
                    rows.append(row)
                    print(f"round {r + 1} {kind:<14} idle={idle:<5} {m:<10} {row['rps']:>9.0f}/s "
                          f"{row['us_per_reply']:6.2f}us {row['syscalls_per_reply']:5.2f} sys/reply",
                          file=sys.stderr)
    keys = list(rows[0].keys()) if rows else []
    with open(os.path.join(outdir, "raw.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)

    def med(m, kind, idle, key):
        v = [x[key] for x in rows if x["mechanism"] == m and x["load"] == kind and x["idle"] == idle]
        return statistics.median(v) if v else float("nan")

    lines = [f"# evlab mechanisms benchmark ({stamp})", "",
             f"Kernel {os.uname().release}; server on CPU 0, client on CPU 1; {args.rounds} rounds, medians.",
             f"Command: `bench/mechanisms_bench.py --rounds {args.rounds} --duration {args.duration} "
             f"--conns {args.conns} --idle {args.idle}`", ""]
    for kind, idle in loads:
        lines += [f"## {kind}" + (f", {idle} idle connections" if idle else ""), "",
                  "| mechanism | replies/s | CPU µs/reply | syscalls/reply | epoll_ctl/reply | io_uring_enter/reply | waits/reply | waits from memory | discarded/reply |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for m in mechs:
            lines.append(f"| {m} | {med(m, kind, idle, 'rps'):,.0f} | {med(m, kind, idle, 'us_per_reply'):.2f} | "
                         f"{med(m, kind, idle, 'syscalls_per_reply'):.2f} | {med(m, kind, idle, 'epoll_ctl_per_reply'):.2f} | "
                         f"{med(m, kind, idle, 'enter_per_reply'):.2f} | {med(m, kind, idle, 'waits_per_reply'):.3f} | "
                         f"{100 * med(m, kind, idle, 'waits_from_memory'):.0f}% | {med(m, kind, idle, 'discarded_per_reply'):.2f} |")
        lines.append("")
    text = "\n".join(lines)
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    print(f"raw data: {outdir}/raw.csv")


if __name__ == "__main__":
    main()
