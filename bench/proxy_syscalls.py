#!/usr/bin/env python3
"""Syscalls (and io_uring enters) per response through evlab proxy, per mechanism, forwarding
mode and body size: counts from the proxy's own stats, not timings (docs/proxy.md, "Syscalls
per request").

    bench/proxy_syscalls.py target/debug/evlab epoll-et,uring copy,splice,splice-release 65536,1048576

An `evlab serve` origin on a free port serves one file per size from /tmp/evlab-syscalls; for
each mechanism, mode and size a fresh `evlab proxy --cache-bytes 0 --stats` takes
`evlab load --rate 50 --num-conns $CONNS --num-calls $CALLS` (default 40 x 5: 200 requests on
keep-alive connections), then its `/.evlab/stats` is read and divided by the responses (the
stats request itself left out). Prints one line per point."""
import json, os, re, subprocess, sys, time, urllib.request
EV = sys.argv[1]
mechs = sys.argv[2].split(',')
modes = sys.argv[3].split(',')
sizes = [int(x) for x in sys.argv[4].split(',')]
N_CONNS = int(os.environ.get('CONNS', '40')); CALLS = int(os.environ.get('CALLS', '5'))
root = '/tmp/evlab-syscalls'; os.makedirs(root, exist_ok=True)
for s in sizes:
    with open(f'{root}/b{s}', 'wb') as f: f.write(bytes((i * 7) % 251 for i in range(s)))
def start(args):
    p = subprocess.Popen([EV] + args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    port = int(re.search(r':(\d+)', line).group(1))
    return p, port
o, oport = start(['serve', '--listen', '127.0.0.1:0', '--root', root])
try:
    for m in mechs:
        for mode in modes:
            for s in sizes:
                p, port = start(['proxy', '--listen', '127.0.0.1:0', '--origin', f'127.0.0.1:{oport}',
                                 '--mechanism', m, '--forward', mode, '--cache-bytes', '0', '--stats'])
                subprocess.run([EV, 'load', '--port', str(port), '--uri', f'/b{s}', '--rate', '50',
                                '--num-conns', str(N_CONNS), '--num-calls', str(CALLS), '--timeout', '10'],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
                st = json.load(urllib.request.urlopen(f'http://127.0.0.1:{port}/.evlab/stats'))
                p.terminate(); p.wait()
                n = st['requests'] - 1
                sc = st['syscalls']
                g = lambda k: sc.get(k, {}).get('calls', 0) / n
                total = st['syscalls_total'] / n
                print(f"{m:10} {mode:15} {s:8} req={n} syscalls={total:6.1f} splice={g('splice'):5.1f} "
                      f"read={g('read')+g('recv'):4.1f} write={g('send')+g('writev')+g('write'):4.1f} "
                      f"wait={g('epoll_wait')+g('epoll_ctl')+g('poll')+g('select'):4.1f} enter={g('io_uring_enter'):5.1f} fcntl={g('fcntl'):4.2f} "
                      f"2xx={st['responses']}", flush=True)
finally:
    o.terminate(); o.wait()
