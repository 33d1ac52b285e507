#!/usr/bin/env python3
"""evlab proxy's user-space instructions per request, per engine: counted by callgrind, not timed.

Where a timing of the proxy's CPU moves by several percent from one run to the next on a noisy
VM, an instruction count does not: the same load through the same build executes the same
instructions within a fraction of a percent. What it counts is the proxy process's own code
and its libraries (the state machine, the engine, the allocator, libc); what it cannot see is
the kernel's side of the syscalls and ring enters, and the cost of cache misses. So it says
where the engine's own work differs, and by how much; `bench/proxy_bench.py` stays the judge
of what a request costs.

For each engine (--engines) a fresh `evlab proxy --forward copy --cache-bytes 0` runs under
`valgrind --tool=callgrind` on CPU 0, in front of an `evlab serve` origin (epoll-et) on CPU 1.
A warm-up load runs first; the counters are then zeroed (`callgrind_control -z`), the measured
load runs (`evlab load` at --rate connections of --calls requests each, for --duration
seconds: a rate the proxy keeps up with under valgrind), and the counters are dumped. Each
engine's total is divided by its 2xx replies. The table gives instructions per request and the
ratio to the first engine; the second table, per function (its own instructions, callees not
included), the largest differences between the first engine and each other.

    bench/proxy_instructions.py                       # epoll-et and uring, 16 KiB
    bench/proxy_instructions.py --size 1M --engines epoll-et,uring,poll

Needs valgrind (scripts/setup.sh installs it). Writes results/bench/proxy-instructions-<time>/
(summary.md and the callgrind files, which `callgrind_annotate` reads) and prints the summary.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (PRLIMIT, ROOT, evlab_bin, free_port, size_bytes, spawn_group,  # noqa: E402
                     start_origin, stop_all_groups, stop_group, wait_port)

PROXY_CPU, CLIENT_CPU = "0", "1"


def load(evlab, port, path, rate, calls, duration):
    argv = ["taskset", "-c", CLIENT_CPU, evlab, "load", "--server", "127.0.0.1", "--port",
            str(port), "--uri", path, "--rate", f"{rate:g}", "--num-calls", str(calls),
            "--duration", str(duration), "--timeout", "10", "--json", "-", "--quiet"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 120)
    if p.returncode != 0:
        raise RuntimeError(f"evlab load failed ({p.returncode}): {p.stderr.strip()[-300:]}")
    r = json.loads(p.stdout)
    errors = r.get("errors", {}).get("total", 0)
    return r["replies"]["status"]["2xx"], errors


def total_instructions(path):
    """The dump's total (its `totals:` line, else `summary:`)."""
    found = {}
    with open(path) as f:
        for line in f:
            for key in ("totals:", "summary:"):
                if line.startswith(key):
                    found[key] = int(line.split()[1])
    n = found.get("totals:", found.get("summary:"))
    if n is None:
        raise RuntimeError(f"{path}: no totals in the callgrind dump")
    return n


def per_function(path):
    """Each function's own instructions (callees not included), by name."""
    out = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", "--auto=no",
                          path], capture_output=True, text=True, check=True).stdout
    costs, started = {}, False
    for line in out.splitlines():
        if "file:function" in line:
            started = True
            continue
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)", line)
        # The thread's entry points carry the whole total (100%): not a function's own cost.
        if not (started and m) or "(100.0%)" in line:
            continue
        name = re.sub(r"\s*\[[^\]]*\]$", "", m.group(2))
        name = name.split(":", 1)[1] if ":" in name else name
        costs[name] = costs.get(name, 0) + int(m.group(1).replace(",", ""))
    return costs


def measure(engine, args, origin_port, path, outdir):
    port = free_port()
    dump = os.path.join(outdir, f"callgrind.{engine}")
    argv = PRLIMIT + ["taskset", "-c", PROXY_CPU, "valgrind", "--tool=callgrind",
                      f"--callgrind-out-file={dump}", args.evlab, "proxy", "--listen",
                      f"127.0.0.1:{port}", "--origin", f"127.0.0.1:{origin_port}",
                      "--mechanism", engine, "--forward", "copy", "--cache-bytes", "0"]
    log = open(os.path.join(outdir, f"proxy.{engine}.err"), "w")
    proc = spawn_group(argv, stdout=subprocess.DEVNULL, stderr=log)
    try:
        if not wait_port(port, timeout=60):
            raise RuntimeError(f"{engine}: the proxy did not listen under valgrind")
        load(args.evlab, port, path, args.rate, args.calls, args.warmup)
        # prlimit, taskset and valgrind each exec the next: the pid is valgrind's.
        vpid = proc.pid
        subprocess.run(["callgrind_control", "-z", str(vpid)], check=True,
                       stdout=subprocess.DEVNULL)
        ok, errors = load(args.evlab, port, path, args.rate, args.calls, args.duration)
        subprocess.run(["callgrind_control", "-d", str(vpid)], check=True,
                       stdout=subprocess.DEVNULL)
    finally:
        stop_group(proc)
        log.close()
    if errors or ok == 0:
        raise RuntimeError(f"{engine}: {ok} 2xx replies, {errors} errors: not a clean run")
    dumps = sorted(f for f in os.listdir(outdir) if f.startswith(f"callgrind.{engine}."))
    if not dumps:
        raise RuntimeError(f"{engine}: callgrind wrote no dump")
    first = os.path.join(outdir, dumps[0])  # the one asked for: the counters since the zero
    return ok, total_instructions(first), per_function(first)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engines", default="epoll-et,uring")
    ap.add_argument("--size", default="16K", help="the object's size (default 16K)")
    ap.add_argument("--rate", type=float, default=20,
                    help="connections per second (default 20: 200 requests/s)")
    ap.add_argument("--calls", type=int, default=10, help="requests per connection (default 10)")
    ap.add_argument("--duration", type=float, default=10, help="measured seconds (default 10)")
    ap.add_argument("--warmup", type=float, default=2, help="warm-up seconds (default 2)")
    ap.add_argument("--top", type=int, default=20, help="functions listed per pair (default 20)")
    ap.add_argument("--evlab", default=evlab_bin("evlab"))
    args = ap.parse_args()
    for tool in ("valgrind", "callgrind_control", "callgrind_annotate", "taskset"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed: run scripts/setup.sh")
    if not os.path.exists(args.evlab):
        sys.exit(f"{args.evlab}: no such binary (cargo build --release)")
    engines = [e for e in args.engines.split(",") if e]
    size = size_bytes(args.size)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    outdir = os.path.join(ROOT, "results", "bench", f"proxy-instructions-{stamp}")
    os.makedirs(outdir)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, f"o{size}"), "wb") as f:
            f.write(os.urandom(size))
        origin, origin_port = start_origin(args.evlab, tmp, CLIENT_CPU)
        try:
            if not wait_port(origin_port):
                sys.exit("the origin did not listen")
            for e in engines:
                rows[e] = measure(e, args, origin_port, f"/o{size}", outdir)
                print(f"{e}: {rows[e][0]} requests, {rows[e][1] / rows[e][0]:,.0f} "
                      "instructions per request", file=sys.stderr)
        finally:
            stop_group(origin)
            stop_all_groups()
    base = engines[0]
    lines = [f"# evlab proxy: user-space instructions per request ({args.size}, copy)", "",
             f"callgrind, `{' '.join(sys.argv)}`. The proxy on CPU {PROXY_CPU} under valgrind; "
             f"`evlab load` at {args.rate:g} connections/s of {args.calls} requests for "
             f"{args.duration:g} s after a {args.warmup:g} s warm-up. The kernel's side of each "
             "syscall is not counted.", "",
             "| engine | requests | instructions per request | ratio to " + base + " |",
             "|---|---:|---:|---:|"]
    b_ok, b_total, b_fn = rows[base]
    for e in engines:
        ok, total, _ = rows[e]
        lines.append(f"| {e} | {ok} | {total / ok:,.0f} | {total / ok / (b_total / b_ok):.3f} |")
    for e in engines[1:]:
        ok, _, fn = rows[e]
        lines += ["", f"Per function, own instructions per request: {base} against {e}, the "
                  f"{args.top} largest differences.", "",
                  f"| {base} | {e} | difference | function |", "|---:|---:|---:|---|"]
        names = set(b_fn) | set(fn)
        diff = sorted(names, key=lambda k: -abs(fn.get(k, 0) / ok - b_fn.get(k, 0) / b_ok))
        for k in diff[:args.top]:
            a, b = b_fn.get(k, 0) / b_ok, fn.get(k, 0) / ok
            lines.append(f"| {a:,.0f} | {b:,.0f} | {b - a:+,.0f} | `{k[:110]}` |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    print(f"written to {os.path.relpath(outdir, ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
