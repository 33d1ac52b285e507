#!/usr/bin/env python3
"""One client host or two: with the server as the bottleneck, does the number of client hosts
change what `evlab run --hosts` measures?

The claim (written before the run that judges it): when the server's CPU budget, not the
client, limits the reply rate, splitting the same offered rate over two client hosts instead of
one gives the same total reply rate. Rule: the 90% interval of B/A (B: two client hosts, A:
one; `evlab compare`'s Welch interval of the ratio of the means) lies within [0.95, 1.05]:
"equivalent within ±5%". An interval that reaches outside it is "not shown", whatever its
middle; a point flagged invalid (a client saturated, fell behind, started late) is reported and
leaves the claim undecided. Second check, exact: in every point the client hosts' offered rates
(as each scheduled its own) add up to the requested rate within 1%.

The set-up, fixed before any data: scripts/netns-hosts.sh makes three namespace hosts (h0 the
server, h1 and h2 clients) on this machine; the experiment is epoll-lt, the one-byte workload,
6,000 connections/s offered against a server held to 0.15 of a CPU (its capacity there is about
half of that: the quick experiment's reference runs put epoll-lt at ~5,800/s with 0.25 of a
CPU on loopback), 10 s points, 5 trials. A runs first, then B (the runs are sequential: a drift
of the machine between them is inside the interval only as far as it shows in the trials).

Runs so far (2026-11-27, the 2-vCPU AMD EPYC VM; docs/hosts.md has them in full, the rule
unchanged throughout):
1. As set up above: every point failed. Each namespace host had net.ipv4.tcp_tw_reuse = 2
   (reuse on loopback only), so one client's 28,232 ephemeral ports, held 60 s in TIME_WAIT,
   ran out and connect() spent its time searching them (90% of the client's CPU in the
   kernel, 421 connections/s started). scripts/netns-hosts.sh now sets tcp_tw_reuse = 1.
2. As set up above, with that fixed: every point invalid, the clients fell behind (a client
   host here started ~3,100 connections/s against an overloaded server, two sharing one CPU
   ~2,450 each): undecided. The set-up's overload was past what a client on this box can
   start, so the server was not the only bottleneck.
3. --budget 0.05 --rate 1500 (the same overload, 1.7x the server's capacity, within what one
   client starts): all 10 points valid; B/A = 0.953 [90%: 0.827-1.098]: not shown.

Writes results/bench/hosts-clients-<timestamp>/{one,two}/ (each an `evlab run` directory),
compare.md, and summary.md, and prints the summary. Needs root (namespaces) and the release
build (cargo build --release).
Usage: bench/hosts_clients.py [--trials 5] [--duration 10] [--rate 6000] [--budget 0.15]
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT, evlab_bin  # noqa: E402

TAG = "bhc"


def netns(cmd, d):
    return subprocess.run([os.path.join(ROOT, "scripts", "netns-hosts.sh"), *cmd, d],
                          env={**os.environ, "EVLAB_NETNS_TAG": TAG}, check=True,
                          capture_output=True, text=True).stdout


def one_client(hosts_toml):
    """The hosts file without its last host block (h2): h0 the server, h1 the client."""
    blocks = hosts_toml.split("\n[[host]]")
    return "\n[[host]]".join(blocks[:-1]) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--rate", type=int, default=6000)
    ap.add_argument("--budget", type=float, default=0.15)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("hosts_clients: needs root (network namespaces)")
    evlab = evlab_bin("evlab")
    if not os.path.exists(evlab):
        sys.exit("hosts_clients: no target/release/evlab: run cargo build --release first")
    out = os.path.join(ROOT, "results", "bench", time.strftime("hosts-clients-%Y%m%d-%H%M%S"))
    os.makedirs(out)
    hdir = f"/tmp/evlab-netns-{TAG}"
    subprocess.run([os.path.join(ROOT, "scripts", "netns-hosts.sh"), "down", hdir],
                   env={**os.environ, "EVLAB_NETNS_TAG": TAG}, capture_output=True)
    try:
        two = netns(["up", "3"], hdir).strip().splitlines()[-1]
        one = os.path.join(hdir, "hosts-one.toml")
        with open(two) as f, open(one, "w") as g:
            g.write(one_client(f.read()))
        spec = os.path.join(out, "hosts-clients.toml")
        with open(spec, "w") as f:
            f.write(f'name = "hosts-clients"\n'
                    f'description = "epoll-lt at a fixed overload, the server on a budget"\n'
                    f'mechanisms = ["epoll-lt"]\nrates = [{a.rate}]\n'
                    f'server_cpu_budget = {a.budget}\nduration_s = {a.duration}\n'
                    f'trials = {a.trials}\nfindings = "none"\n')
        runs = {}
        for name, hosts in (("one", one), ("two", two)):
            d = os.path.join(out, name)
            cmd = [evlab, "run", spec, "--hosts", hosts, "--out", d, "--quiet"]
            print("$ " + " ".join(cmd), file=sys.stderr)
            subprocess.run(cmd, check=True)
            with open(os.path.join(d, "summary.json")) as f:
                runs[name] = json.load(f)
        cmp_md = os.path.join(out, "compare.md")
        cmp_json = os.path.join(out, "compare.json")
        subprocess.run([evlab, "compare", os.path.join(out, "one"), os.path.join(out, "two"),
                        "--md", cmp_md, "--json", cmp_json], check=False,
                       stdout=subprocess.DEVNULL)
        with open(cmp_json) as f:
            cmp = json.load(f)
    finally:
        netns(["down"], hdir)
    write_summary(out, a, runs, cmp)


def write_summary(out, a, runs, cmp):
    lines = [f"# One client host or two (server epoll-lt on {a.budget} CPU, {a.rate}/s offered, "
             f"{a.duration:g} s points, {a.trials} trials)", ""]
    lines.append("| run | trial | reply rate /s | client offered rates /s | sum / requested "
                 "| flags |")
    lines.append("|---|---|---|---|---|---|")
    sums_ok = True
    flagged = 0
    for name, s in runs.items():
        for p in s["points"]:
            offered = [h["offered_rate"] for h in p.get("hosts", [])]
            ratio = sum(offered) / p["rate"]
            sums_ok &= abs(ratio - 1) <= 0.01
            flagged += bool(p["flags"])
            lines.append(f"| {name} | {p['trial']} | {p['load']['reply_rate_avg']:.0f} | "
                         f"{' + '.join(f'{x:.0f}' for x in offered)} | {ratio:.4f} | "
                         f"{'; '.join(p['flags']) or '—'} |")
    lines.append("")
    lines.append(f"Offered rates add up to the requested rate within 1% in every point: "
                 f"{'yes' if sums_ok else 'NO'}.")
    verdict = "undecided (no interval)"
    for row in cmp.get("points", []):
        if row.get("quantity") != "replies/s" or not row.get("ratio"):
            continue
        r, lo, hi = row["ratio"]
        if flagged:
            verdict = f"undecided: {flagged} point(s) flagged invalid"
        elif lo >= 0.95 and hi <= 1.05:
            verdict = "equivalent within ±5%"
        else:
            verdict = "not shown (the interval reaches outside ±5%)"
        lines.append(f"Total reply rate, two client hosts / one: {r:.3f} "
                     f"[90%: {lo:.3f}–{hi:.3f}]: {verdict}.")
    if verdict.startswith("undecided (no"):
        lines.append(f"No interval in compare.json: {verdict}.")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
