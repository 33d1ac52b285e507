#!/usr/bin/env bash
# The reference runs of 2026-11-28, as they were made (from the repository's root, after
# `cargo build --release`, the machine quiet). Each writes
# results/reference/amd-epyc-2vcpu-linux-6.18/NAME/ and NAME.log.
set -euo pipefail
out=results/reference/amd-epyc-2vcpu-linux-6.18
evlab=target/release/evlab
run() { # NAME EXPERIMENT [FLAGS...]
  local name=$1; shift
  rm -rf "${out:?}/$name"
  "$evlab" run "$@" --quiet --out "$out/$name" 2>&1 | tee "$out/$name.log"
}
case "${1:-all}" in
  herd)
    # herd-serve with its process sweep (1 … 512 pre-forked processes), its first run; the
    # herd-procs rules were written before it.
    run herd-serve-procs herd-serve
    ;;
  proxy)
    # The proxy paper's remaining figures, each one's first run; their rules were written
    # before it.
    run fig-proxy-rt fig-proxy-rt
    run fig-proxy-rate fig-proxy-rate
    run fig-proxy-conns fig-proxy-conns
    ;;
  *) echo "usage: $0 herd | proxy" >&2; exit 2 ;;
esac
