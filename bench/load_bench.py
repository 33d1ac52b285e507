#!/usr/bin/env python3
"""evlab load against httperf and wrk, the same server for all (evlab serve, epoll-et, CPU 0),
each client pinned to CPU 1.

1. Accuracy: the same unsaturated offered rate, one request per connection: both generators
   must report the same reply rate (within 2%).
2. Connection-rate ceiling on one CPU: the highest rate each sustains (replies keep up with the
   offered rate, no errors), one request per connection; then evlab load at 2x httperf's ceiling
   for --long seconds, counting addrunavail.
3. Closed-loop ceiling: wrk -t1 -c50 against evlab load with 50 keep-alive connections making
   calls back to back.

Writes results/bench/load-<timestamp>/summary.md.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_bench import ROOT, Server, evlab_bin, free_port, make_docroot  # noqa: E402


def httperf(port, rate, conns, timeout=2):
    try:
        out = subprocess.run(["taskset", "-c", "1", "httperf", "--server", "127.0.0.1", "--port",
                              str(port), "--uri", "/one", "--rate", str(rate), "--num-conns",
                              str(conns), "--num-calls", "1", "--timeout", str(timeout), "--hog"],
                             capture_output=True, text=True,
                             timeout=conns / rate * 3 + 30).stdout
    except subprocess.TimeoutExpired:
        # httperf past its limit spins without finishing: it did not keep up.
        return dict(conn_rate=0.0, replies=0, duration=0.0, errors=-1, addrunavail=0)
    g = lambda rx: float(re.search(rx, out).group(1))  # noqa: E731
    return dict(conn_rate=g(r"Connection rate: ([\d.]+)"),
                replies=int(g(r"Total: connections \d+ requests \d+ replies (\d+)")),
                duration=g(r"test-duration ([\d.]+) s"),
                errors=int(g(r"Errors: total (\d+)")),
                addrunavail=int(g(r"addrunavail (\d+)")))


def evload(port, rate, conns=None, duration=None, calls=1, timeout=2, extra=()):
    args = [evlab_bin("evlab"), "load", "--server", "127.0.0.1", "--port", str(port), "--uri",
            "/one", "--rate", str(rate), "--num-calls", str(calls), "--timeout", str(timeout)]
    args += ["--num-conns", str(conns)] if conns else ["--duration", str(duration)]
    out = subprocess.run(["taskset", "-c", "1"] + args + list(extra), capture_output=True,
                         text=True, timeout=900).stdout
    g = lambda rx: float(re.search(rx, out).group(1))  # noqa: E731
    return dict(conn_rate=g(r"Connection rate: ([\d.]+)"),
                replies=int(g(r"Total: connections \d+ requests \d+ replies (\d+)")),
                duration=g(r"test-duration ([\d.]+) s"),
                errors=int(g(r"Errors: total (\d+)")),
                addrunavail=int(g(r"addrunavail (\d+)")),
                late=int(g(r"Late starts: (\d+)")),
                cpu=g(r"total ([\d.]+)%\)"))


def keeps_up(r, rate, conns):
    # A generator that fell behind its schedule did not offer the rate (httperf does not say;
    # evlab load counts its late starts).
    return (r["errors"] == 0 and r["replies"] == conns and r["conn_rate"] >= 0.97 * rate
            and r.get("late", 0) <= 0.01 * conns)


def ceiling(fn, rates, seconds):
    best = 0
    for rate in rates:
        conns = int(rate * seconds)
        r = fn(rate, conns)
        print(f"  rate {rate}: {r}", file=sys.stderr)
        if keeps_up(r, rate, conns):
            best = rate
        else:
            break
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--accuracy-rate", type=int, default=3000)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--long", type=int, default=60)
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "evlab"], cwd=ROOT, check=True)
    lines = [f"# evlab load vs httperf and wrk ({time.strftime('%Y-%m-%d %H:%M')})", "",
             f"Kernel {os.uname().release}. Server: `evlab serve --mechanism epoll-et` on CPU 0; "
             "each client alone on CPU 1.", ""]
    with tempfile.TemporaryDirectory(prefix="evlab-loadb-") as tmp:
        docroot = make_docroot(tmp)

        def server():
            port = free_port()
            return Server("evlab", [evlab_bin("evlab"), "serve", "--listen", f"127.0.0.1:{port}",
                                    "--root", docroot, "--header-timeout", "0"], port)

        # 1. accuracy
        s = server()
        n = args.accuracy_rate * 5
        h = httperf(s.port, args.accuracy_rate, n)
        e = evload(s.port, args.accuracy_rate, n)
        s.stop()
        hr, er = h["replies"] / h["duration"], e["replies"] / e["duration"]
        lines += ["## Same offered rate, unsaturated", "",
                  f"`--rate {args.accuracy_rate} --num-conns {n} --num-calls 1`: httperf "
                  f"{hr:,.0f} replies/s, evlab load {er:,.0f} replies/s "
                  f"(difference {100 * abs(er - hr) / hr:.2f}%).", ""]
        # 2. connection-rate ceilings
        s = server()
        rates = [2000, 4000, 6000, 8000, 10000, 12000, 14000, 16000, 18000, 20000, 24000, 28000]
        print("httperf:", file=sys.stderr)
        hc = ceiling(lambda r, c: httperf(s.port, r, c), rates, args.seconds)
        print("evlab load:", file=sys.stderr)
        ec = ceiling(lambda r, c: evload(s.port, r, c), rates, args.seconds)
        s.stop()
        lines += ["## Connection-rate ceiling on one CPU (one request per connection)", "",
                  f"Highest rate of {rates} at which every connection got its reply, no errors, "
                  f"{args.seconds} s per step: httperf {hc:,}/s, evlab load {ec:,}/s "
                  f"(ratio {ec / max(hc, 1):.2f}).", ""]
        target = 2 * hc
        s = server()
        long = evload(s.port, target, duration=args.long)
        s.stop()
        lines += [f"evlab load at 2x httperf's ceiling ({target:,}/s) for {args.long} s: "
                  f"{long['replies']:,} replies, {long['conn_rate']:,.0f} conn/s, errors "
                  f"{long['errors']}, addrunavail {long['addrunavail']}, late starts "
                  f"{long['late']}, client CPU {long['cpu']:.0f}%.", ""]
        # 3. closed loop
        s = server()
        w = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", "-c50", "-d5s",
                            f"http://127.0.0.1:{s.port}/one"], capture_output=True, text=True).stdout
        wrps = float(re.search(r"Requests/sec:\s+([\d.]+)", w).group(1))
        k = evload(s.port, 1000, conns=50, calls=200000, timeout=10)
        s.stop()
        krps = k["replies"] / k["duration"]
        lines += ["## Closed-loop ceiling (50 keep-alive connections)", "",
                  f"wrk -t1 -c50: {wrps:,.0f} requests/s; evlab load (50 connections x 200,000 "
                  f"calls): {krps:,.0f} replies/s (ratio {krps / wrps:.2f}).", ""]
    text = "\n".join(lines)
    outdir = os.path.join(ROOT, "results", "bench", f"load-{time.strftime('%Y%m%d-%H%M%S')}")
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
