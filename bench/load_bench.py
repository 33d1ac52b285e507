#!/usr/bin/env python3
"""evlab load against httperf and wrk, the same server for all (evlab serve, epoll-et, CPU 0),
each client pinned to CPU 1.

1. Accuracy: the same unsaturated offered rate, one request per connection: both generators
   must report the same reply rate (within 2%).
2. Connection-rate ceiling on one CPU, one request per connection: the highest rate each
   sustains (every connection answered, no errors, the offered rate kept, for evlab at most 1%
   late starts) in short steps (--seconds) and in --long runs (60 s: what the issue asks). httperf
   runs without --hog: with it, httperf binds its own ports and, with them in TIME_WAIT, stopped
   making progress after 27,000-33,000 connections on loopback at 10,000/s and at 20,000/s. Long httperf
   runs are --pause seconds apart so that its TIME_WAIT sockets (one source address) are gone.
3. Where the client's CPU goes at evlab's sustained rate (`evlab load --profile`): microseconds
   per connection inside each syscall. socket, connect, send, read and close are what any
   generator of one-request connections must make; their time bounds the rate on one CPU.
4. Closed-loop ceiling: wrk -t1 -c50 -d5s against `evlab load URL -c 50 -d 5s -t 1` (wrk's
   model), in --rounds interleaved rounds: the median of evlab's requests/s over wrk's (the goal
   is 1.0; the issue's bar 0.95). Then wrk2's model: `-c 50 -R RATE -d 5s` at 0.9 of evlab's
   median: the largest departure of a whole 1 s sample's reply rate from RATE (the bar: 2%).
   --closed-loop-only measures only this (and needs wrk).

With --evlab-only, only evlab load is measured (no httperf, no wrk, no pauses for httperf's
TIME_WAIT), and --evlab PATH chooses the binary whose `load` runs (the server is always this
tree's target/release/evlab): the same command with two binaries compares two builds of the
generator, e.g. before and after a change.

Writes results/bench/load-<timestamp>/summary.md.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT, Server, evlab_bin, free_port, make_docroot  # noqa: E402


def httperf(port, rate, conns, timeout=2):
    try:
        out = subprocess.run(["taskset", "-c", "1", "httperf", "--server", "127.0.0.1", "--port",
                              str(port), "--uri", "/one", "--rate", str(rate), "--num-conns",
                              str(conns), "--num-calls", "1", "--timeout", str(timeout)],
                             capture_output=True, text=True,
                             timeout=conns / rate * 2 + 30).stdout
    except subprocess.TimeoutExpired:
        # httperf past its limit spins without finishing: it did not keep up.
        return dict(conn_rate=0.0, replies=0, duration=0.0, errors=-1, addrunavail=0)
    g = lambda rx: float(re.search(rx, out).group(1))  # noqa: E731
    return dict(conn_rate=g(r"Connection rate: ([\d.]+)"),
                replies=int(g(r"Total: connections \d+ requests \d+ replies (\d+)")),
                duration=g(r"test-duration ([\d.]+) s"),
                errors=int(g(r"Errors: total (\d+)")),
                addrunavail=int(g(r"addrunavail (\d+)")))


# The binary whose `load` is measured (--evlab).
LOAD_BIN = None


def evload(port, rate, conns=None, duration=None, calls=1, timeout=2, extra=()):
    args = [LOAD_BIN or evlab_bin("evlab"), "load", "--server", "127.0.0.1", "--port", str(port),
            "--uri", "/one", "--rate", str(rate), "--num-calls", str(calls),
            "--timeout", str(timeout)]
    args += ["--num-conns", str(conns)] if conns else ["--duration", str(duration)]
    out = subprocess.run(["taskset", "-c", "1"] + args + list(extra), capture_output=True,
                         text=True, timeout=900).stdout
    g = lambda rx: float(re.search(rx, out).group(1))  # noqa: E731
    m = re.search(r"Syscall time \[us/conn\]:(.*) \(total", out)
    prof = {k: float(v) for k, v in re.findall(r"(\w+) ([\d.]+)", m.group(1))} if m else {}
    return dict(conn_rate=g(r"Connection rate: ([\d.]+)"), profile=prof,
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


def ceiling(fn, rates, seconds, pause=0):
    """The highest of `rates` (ascending) sustained for `seconds`, stopping at the first miss."""
    best = 0
    for i, rate in enumerate(rates):
        if i and pause:
            time.sleep(pause)
        conns = int(rate * seconds)
        r = fn(rate, conns)
        print(f"  rate {rate} for {seconds} s: {r}", file=sys.stderr)
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
    ap.add_argument("--long-from-httperf", type=int, default=10000)
    ap.add_argument("--long-from-evlab", type=int, default=16000)
    ap.add_argument("--pause", type=int, default=62,
                    help="seconds between httperf runs, for its TIME_WAIT sockets to go")
    ap.add_argument("--evlab", help="the evlab binary whose `load` is measured (default: this "
                    "tree's target/release/evlab, built first; the server is always that one)")
    ap.add_argument("--evlab-only", action="store_true",
                    help="measure evlab load alone: no httperf, no wrk")
    ap.add_argument("--closed-loop-only", action="store_true",
                    help="only the closed-loop comparison with wrk (4.), in --rounds rounds")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    global LOAD_BIN
    LOAD_BIN = os.path.abspath(args.evlab) if args.evlab else None
    only = args.evlab_only
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "evlab"], cwd=ROOT, check=True)
    title = "evlab load" if only else "evlab load vs httperf and wrk"
    lines = [f"# {title} ({time.strftime('%Y-%m-%d %H:%M')})", "",
             f"Kernel {os.uname().release}. Server: `evlab serve --mechanism epoll-et` on CPU 0; "
             "each client alone on CPU 1. Generator: "
             f"`{LOAD_BIN or evlab_bin('evlab')}`.", ""]
    # The pauses for httperf's TIME_WAIT sockets, and its columns, unless evlab is measured alone.
    nap = (lambda _: None) if only else time.sleep
    cell = (lambda _: "-") if only else (lambda r: f"{r:,}/s")
    ratio = (lambda *_: "-") if only else (lambda e, h: f"{e / max(h, 1):.2f}")
    with tempfile.TemporaryDirectory(prefix="evlab-loadb-") as tmp:
        docroot = make_docroot(tmp)
        if args.closed_loop_only:
            lines += closed_loop(docroot, args.rounds)
            return finish(lines)

        def server():
            port = free_port()
            return Server("evlab", [evlab_bin("evlab"), "serve", "--listen", f"127.0.0.1:{port}",
                                    "--root", docroot], port)

        # 1. accuracy
        s = server()
        n = args.accuracy_rate * 5
        h = None if only else httperf(s.port, args.accuracy_rate, n)
        e = evload(s.port, args.accuracy_rate, n)
        s.stop()
        er = e["replies"] / e["duration"]
        lines += ["## Same offered rate, unsaturated", ""]
        if h:
            hr = h["replies"] / h["duration"]
            lines += [f"`--rate {args.accuracy_rate} --num-conns {n} --num-calls 1`: httperf "
                      f"{hr:,.0f} replies/s, evlab load {er:,.0f} replies/s "
                      f"(difference {100 * abs(er - hr) / hr:.2f}%).", ""]
        else:
            lines += [f"`--rate {args.accuracy_rate} --num-conns {n} --num-calls 1`: evlab load "
                      f"{er:,.0f} replies/s.", ""]
        # 2. connection-rate ceilings: short steps, then long runs
        s = server()
        rates = [2000, 4000, 6000, 8000, 10000, 12000, 14000, 16000, 18000, 20000, 22000, 24000,
                 26000, 28000, 30000]
        hc = hl = 0
        if not only:
            print("httperf, short:", file=sys.stderr)
            hc = ceiling(lambda r, c: httperf(s.port, r, c), rates, args.seconds)
            time.sleep(args.pause)
        print("evlab load, short:", file=sys.stderr)
        ec = ceiling(lambda r, c: evload(s.port, r, c), rates, args.seconds)
        nap(args.pause)
        if not only:
            print("httperf, long:", file=sys.stderr)
            hl = ceiling(lambda r, c: httperf(s.port, r, c),
                         [r for r in rates if r >= args.long_from_httperf], args.long, args.pause)
        print("evlab load, long:", file=sys.stderr)
        el = ceiling(lambda r, c: evload(s.port, r, c),
                     [r for r in rates if r >= args.long_from_evlab], args.long)
        lines += ["## Connection-rate ceiling on one CPU (one request per connection)", "",
                  f"Highest rate of {rates} at which every connection got its reply, with no "
                  "errors and the offered rate kept (evlab: at most 1% late starts).", "",
                  "| run | httperf | evlab load | ratio |", "|---|---:|---:|---:|",
                  f"| {args.seconds} s steps | {cell(hc)} | {ec:,}/s | {ratio(ec, hc)} |",
                  f"| {args.long} s runs (from {args.long_from_httperf:,} and "
                  f"{args.long_from_evlab:,}) | {cell(hl)} | {el:,}/s | {ratio(el, hl)} |",
                  ""]
        # 3. where the client CPU goes at evlab's sustained rate
        nap(args.pause)
        p = evload(s.port, el or 10000, duration=10, extra=["--profile"])
        s.stop()
        prof = p["profile"]
        must = ["socket", "connect", "send", "read", "close"]
        floor = sum(prof.get(k, 0.0) for k in must)
        cpu_us = p["cpu"] / 100 / max(p["conn_rate"], 1) * 1e6
        lines += [f"`evlab load --profile` at {el or 10000:,}/s for 10 s: {cpu_us:.1f} us of "
                  "client CPU per connection; inside syscalls (us/conn): "
                  + ", ".join(f"{k} {v:.2f}" for k, v in prof.items()) + ".", "",
                  f"The five calls any one-request generator must make (socket, connect, send, "
                  f"read, close) take {floor:.1f} us per connection here, so no generator can "
                  f"exceed {1e6 / max(floor, 1e-9):,.0f} connections/s on one CPU of this "
                  "machine" + ("." if only else f"; 2x httperf's sustained rate would be "
                                               f"{2 * hl:,}/s."), ""]
        # 3. closed loop
        s = server()
        wrps = None
        if not only:
            w = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", "-c50", "-d5s",
                                f"http://127.0.0.1:{s.port}/one"],
                               capture_output=True, text=True).stdout
            wrps = float(re.search(r"Requests/sec:\s+([\d.]+)", w).group(1))
        k = evload(s.port, 1000, conns=50, calls=200000, timeout=10)
        s.stop()
        krps = k["replies"] / k["duration"]
        versus = f"wrk -t1 -c50: {wrps:,.0f} requests/s; " if wrps else ""
        against = f" (ratio {krps / wrps:.2f})" if wrps else ""
        lines += ["## Closed-loop ceiling (50 keep-alive connections)", "",
                  f"{versus}evlab load (50 connections x 200,000 "
                  f"calls): {krps:,.0f} replies/s{against}.", ""]
    finish(lines)


def wrk_model(port, conns, seconds, rate=None):
    """`evlab load` in wrk's model (-R: wrk2's), its JSON report."""
    args = [LOAD_BIN or evlab_bin("evlab"), "load", f"http://127.0.0.1:{port}/one", "-c",
            str(conns), "-d", f"{seconds}s", "-t", "1", "--sample-interval", "1s", "--json", "-",
            "--quiet"]
    if rate:
        args += ["-R", str(rate)]
    out = subprocess.run(["taskset", "-c", "1"] + args, capture_output=True, text=True,
                         timeout=seconds + 60).stdout
    return json.loads(out)


def closed_loop(docroot, rounds):
    """wrk -t1 -c50 -d5s against evlab load -c 50 -d 5s -t 1, interleaved, one fresh server
    each; then -R at 0.9 of evlab's median."""
    ratios, evs, wrks, busy = [], [], [], {"wrk": [], "evlab": []}
    for r in range(rounds):
        for who in (("wrk", "evlab") if r % 2 == 0 else ("evlab", "wrk")):
            s = closed_server(docroot)
            c0 = s.cpu()
            if who == "wrk":
                w = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", "-c50", "-d5s",
                                    f"http://127.0.0.1:{s.port}/one"],
                                   capture_output=True, text=True).stdout
                wrks.append(float(re.search(r"Requests/sec:\s+([\d.]+)", w).group(1)))
            else:
                v = wrk_model(s.port, 50, 5)
                evs.append(v["replies"]["total"] / v["duration_s"])
            # The server's share of its CPU over the 5 s: near 100%, the server, not the
            # client, set the rate.
            busy[who].append((s.cpu() - c0) / 5.0)
            s.stop()
        ratios.append(evs[-1] / wrks[-1])
        print(f"  round {r + 1}: wrk {wrks[-1]:,.0f}/s, evlab {evs[-1]:,.0f}/s, "
              f"ratio {ratios[-1]:.3f}", file=sys.stderr)
    med = sorted(ratios)[len(ratios) // 2]
    held = round(0.9 * sorted(evs)[len(evs) // 2], -2)
    s = closed_server(docroot)
    v = wrk_model(s.port, 50, 5, rate=held)
    s.stop()
    whole = [x["reply_rate"] for x in v["samples"] if not x.get("partial")]
    worst = max(abs(x - held) / held for x in whole) if whole else float("nan")
    return (["## Closed loop: wrk's model against wrk (50 connections, one client CPU)", "",
             "| round | wrk -t1 -c50 -d5s (req/s) | evlab load -c 50 -d 5s -t 1 (req/s) | ratio |",
             "|---:|---:|---:|---:|"]
            + [f"| {i + 1} | {w:,.0f} | {e:,.0f} | {q:.3f} |"
               for i, (w, e, q) in enumerate(zip(wrks, evs, ratios))]
            + ["", f"Median ratio evlab/wrk: **{med:.3f}** (goal 1.0, bar 0.95). The server's "
               f"CPU busy: under wrk {', '.join(f'{100 * b:.0f}%' for b in busy['wrk'])}; under "
               f"evlab {', '.join(f'{100 * b:.0f}%' for b in busy['evlab'])} (near 100%: the "
               f"server set the rate, not the client).", "",
              f"wrk2's model, `-c 50 -R {held:,.0f} -d 5s` (0.9 of evlab's median): whole 1 s "
              f"samples {', '.join(f'{x:,.0f}' for x in whole)} replies/s; the largest "
              f"departure {100 * worst:.2f}% (bar 2%); corrected p99 "
              f"{v['latency_ms']['p99']:.2f} ms, uncorrected "
              f"{v['latency_uncorrected_ms']['p99']:.2f} ms.", ""])


def closed_server(docroot):
    port = free_port()
    return Server("evlab", [evlab_bin("evlab"), "serve", "--listen", f"127.0.0.1:{port}",
                            "--root", docroot, "--mechanism", "epoll-et", "--header-timeout",
                            "0"], port)


def finish(lines):
    text = "\n".join(lines)
    outdir = os.path.join(ROOT, "results", "bench", f"load-{time.strftime('%Y%m%d-%H%M%S')}")
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
