#!/bin/bash
# Heavier requests, no budget: does the server (CPU 0) saturate before the client (CPU 1)?
E=${EVLAB:-target/release/evlab}; mkdir -p /tmp/w && printf a > /tmp/w/one; mkdir -p /tmp/exp
M=${1:-epoll-et}; CALLS=${2:-10}
setsid taskset -c 0 $E serve --listen 127.0.0.1:0 --root /tmp/w --mechanism $M --header-timeout 0 > /tmp/exp/s3.out 2>&1 &
SP=$!
sleep 0.5; P=$(grep -o '[0-9]*$' /tmp/exp/s3.out); SPID=$(pgrep -f "mechanism $M --header-timeout 0" | head -1)
for r in $3; do
  grep -E "^cpu[01] " /proc/stat > /tmp/exp/st0; c0=$(awk '{print $14+$15}' /proc/$SPID/stat)
  taskset -c 1 $E load --server 127.0.0.1 --port $P --uri /one --rate $r --num-conns $((r*3)) --num-calls $CALLS --timeout 1 --sample-interval 1 --quiet --json /tmp/exp/h.json
  c1=$(awk '{print $14+$15}' /proc/$SPID/stat); grep -E "^cpu[01] " /proc/stat > /tmp/exp/st1
  python3 - $r $c0 $c1 $M $CALLS <<'PY'
import json,sys
v=json.load(open('/tmp/exp/h.json'));s=v['schedule']
def busy(i):
  a=open('/tmp/exp/st0').read().split('\n')[i].split()[1:9];b=open('/tmp/exp/st1').read().split('\n')[i].split()[1:9]
  d=[int(y)-int(x) for x,y in zip(a,b)];return (d[0]+d[1]+d[2]+d[5]+d[6])/max(1,sum(d))
r=float(sys.argv[1]);cpu=(int(sys.argv[3])-int(sys.argv[2]))/100
print(f"{sys.argv[4]} calls={sys.argv[5]} conns/s {r:.0f}: replies/s {v['replies']['rate']['avg']:.0f}  starts {s['achieved_start_rate']*100/r:.1f}%  client CPU busy {busy(1)*100:.0f}% (proc {v['cpu']['percent']:.0f}%)  server CPU0 busy {busy(0)*100:.0f}% (proc {cpu/v['duration_s']*100:.0f}%)  p99 {v['latency_ms']['p99']:.1f} ms")
PY
done
kill -- -$SP
