#!/usr/bin/env python3
"""evlab serve's memory with its default flags: does it stay flat under load, and what does an
idle connection cost after a burst?

1. steady load: `evlab serve` (default flags: 60 s header and send timeouts) under
   `wrk -t1 -c50` for --duration seconds (default 60); its RSS after 5 s and at the end.
   (When timers were an entry per reply kept for the whole timeout, the issue that changed
   them reported 3.9 MB growing to 72 MB in 20 s at 109k req/s.)
2. idle after a burst: --idle connections (default 10,000) each pipeline --burst GETs of a
   16 KiB file (default 40), read the replies, then stay open and idle. RSS above the
   server's baseline, divided by the connections: what one idle connection holds. (When
   buffers were cleared but never shrunk, the same issue reported ~265 KiB per connection.)

Each for --mechanisms (default epoll-et,uring), the server pinned to CPU 0, clients to CPU 1.
Writes results/bench/memory-<timestamp>/summary.md and prints it.
Usage: bench/memory_bench.py [--duration 60] [--idle 10000] [--burst 40] [--mechanisms ...]
"""

import argparse
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (ROOT, Server, evlab_bin, free_port, make_docroot, rss_kib,  # noqa: E402
                     spawn_group, stop_group)


def start(mech, docroot, extra=()):
    port = free_port()
    return Server(f"evlab-{mech}", [evlab_bin("evlab"), "serve", "--listen", f"127.0.0.1:{port}",
                                    "--root", docroot, "--mechanism", mech, *extra], port)


def steady(mech, docroot, duration):
    s = start(mech, docroot)
    try:
        wrk = spawn_group(["taskset", "-c", "1", "wrk", "-t1", "-c50", f"-d{duration}s",
                           f"http://127.0.0.1:{s.port}/one"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            time.sleep(5)
            at5 = rss_kib(s.proc.pid)
            out, _ = wrk.communicate(timeout=duration + 60)
        finally:
            stop_group(wrk)
        end = rss_kib(s.proc.pid)
        rps = next((line.split()[-1] for line in out.splitlines() if "Requests/sec" in line), "?")
        return at5, end, rps
    finally:
        s.stop()


def recv_exact(sock, n):
    while n > 0:
        b = sock.recv(min(n, 1 << 20))
        if not b:
            raise RuntimeError("the server closed a connection during the burst")
        n -= len(b)


def idle_after_burst(mech, docroot, n, burst):
    s = start(mech, docroot)
    conns = []
    try:
        # One reply's length: head + 16 KiB (the Date header has a fixed width).
        probe = socket.create_connection(("127.0.0.1", s.port))
        probe.sendall(b"GET /f16k HTTP/1.1\r\nHost: m\r\n\r\n")
        got = b""
        while b"\r\n\r\n" not in got:
            got += probe.recv(65536)
        head = got.index(b"\r\n\r\n") + 4
        recv_exact(probe, head + 16384 - len(got))
        one = head + 16384
        probe.close()
        time.sleep(0.5)
        base = rss_kib(s.proc.pid)
        req = b"GET /f16k HTTP/1.1\r\nHost: m\r\n\r\n" * burst
        for i in range(n):
            c = socket.socket()
            c.bind((f"127.3.{(i >> 8) & 255}.{i & 255 or 1}", 0))
            c.connect(("127.0.0.1", s.port))
            c.sendall(req)
            recv_exact(c, one * burst)
            conns.append(c)
        time.sleep(1)
        after = rss_kib(s.proc.pid)
        return base, after
    finally:
        for c in conns:
            c.close()
        s.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=60)
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--burst", type=int, default=40)
    ap.add_argument("--mechanisms", default="epoll-et,uring")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if args.idle + 100 > hard:
        sys.exit(f"--idle {args.idle} needs more descriptors than the limit ({hard})")
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed: run scripts/setup.sh")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "evlab"], cwd=ROOT, check=True)
    os.sched_setaffinity(0, {1})
    stamp = time.strftime("%Y%m%d-%H%M%S")
    outdir = os.path.join(ROOT, "results", "bench", f"memory-{stamp}")
    os.makedirs(outdir, exist_ok=True)
    lines = [f"# evlab serve memory ({stamp})", "",
             f"Kernel {os.uname().release}. Default flags; server on CPU 0, clients on CPU 1.",
             f"Command: `bench/memory_bench.py --duration {args.duration} --idle {args.idle} "
             f"--burst {args.burst} --mechanisms {args.mechanisms}`", "",
             f"| mechanism | RSS after 5 s of wrk -c50 | after {args.duration} s | ratio | req/s "
             f"| idle after a {args.burst} × 16 KiB burst, per connection |",
             "|---|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory(prefix="evlab-mem-") as tmp:
        docroot = make_docroot(tmp)
        with open(os.path.join(docroot, "f16k"), "wb") as f:
            f.write(bytes(i % 251 for i in range(16384)))
        os.chmod(os.path.join(docroot, "f16k"), 0o644)
        for mech in [m for m in args.mechanisms.split(",") if m]:
            at5, end, rps = steady(mech, docroot, args.duration)
            print(f"{mech}: RSS {at5} KiB after 5 s, {end} KiB after {args.duration} s "
                  f"({rps} req/s)", file=sys.stderr)
            base, after = idle_after_burst(mech, docroot, args.idle, args.burst)
            per = (after - base) / args.idle
            print(f"{mech}: {args.idle} idle after a burst: {base} -> {after} KiB, "
                  f"{per:.2f} KiB each", file=sys.stderr)
            lines.append(f"| {mech} | {at5 / 1024:.1f} MiB | {end / 1024:.1f} MiB | "
                         f"{end / at5:.2f} | {rps} | {per:.2f} KiB |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
