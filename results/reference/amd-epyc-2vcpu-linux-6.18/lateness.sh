#!/bin/bash
# Lateness of an unloaded generator: evlab load against evlab serve epoll-et (no budget),
# server on CPU 0, client on CPU 1; 3 runs per rate of 3 s each.
E=${EVLAB:-target/release/evlab}; mkdir -p /tmp/w && printf a > /tmp/w/one; mkdir -p /tmp/exp
setsid taskset -c 0 $E serve --listen 127.0.0.1:0 --root /tmp/w --mechanism epoll-et --header-timeout 0 > /tmp/exp/s2.out 2>&1 &
SP=$!
sleep 0.5; P=$(grep -o '[0-9]*$' /tmp/exp/s2.out)
for r in 500 1000 2000 4000 8000; do for rep in 1 2 3; do
  T0=$(date +%s.%N); grep -E "^cpu1 " /proc/stat > /tmp/exp/st0
  taskset -c 1 $E load --server 127.0.0.1 --port $P --uri /one --rate $r --num-conns $((r*3)) --timeout 1 --sample-interval 1 --quiet --json /tmp/exp/lat.json
  grep -E "^cpu1 " /proc/stat > /tmp/exp/st1; T1=$(date +%s.%N)
  python3 - $r $T0 $T1 <<'PY'
import json,sys
v=json.load(open('/tmp/exp/lat.json'));s=v['schedule'];l=s['lateness_ms']
a=open('/tmp/exp/st0').read().split()[1:9];b=open('/tmp/exp/st1').read().split()[1:9]
d=[int(y)-int(x) for x,y in zip(a,b)];busy=1-(d[3]+d[4])/100/(float(sys.argv[3])-float(sys.argv[2]))
print(f"rate {sys.argv[1]:>5}: late>1ms {v['late_starts']['count']*100/v['connections']['initiated']:5.2f}%  p50 {l['p50']:.3f}  p99 {l['p99']:.3f}  max {l['max']:6.2f} ms  end lag {s['end_lag_ms']:.3f} ms  starts {s['achieved_start_rate']*100/float(sys.argv[1]):.2f}%  client proc {v['cpu']['percent']:.0f}%  client CPU busy {busy*100:.0f}% steal {d[7]}")
PY
done; done
kill -- -$SP
