#!/usr/bin/env bash
# The reference runs of 2026-11-27, as they were made (from the repository's root, after
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
  micro)
    # The read-ahead benchmark's first run (its rules written before it), and pipetest and
    # fdalloc again under today's interval rules (fdalloc with its linear-scan control).
    run readahead readahead
    run pipetest-2026-11-27 pipetest
    run fdalloc-2026-11-27 fdalloc
    ;;
  controls)
    # Figures 1 and 3 with the negative control beside their "no difference" rules (the same
    # capacity search as fig1-one-byte-knee and fig3-epoll-variants-knee), 2 s points.
    run fig1-one-byte-control fig1-one-byte --duration 2
    run fig3-epoll-variants-control fig3-epoll-variants --duration 2
    ;;
  quick)
    # The default experiment twice more, on today's build: its rules unchanged since runs 5
    # and 6, a confirmation of the bar (at least 5 findings decisive in both, none opposite).
    run quick-knee-run7 quick
    run quick-knee-run8 quick
    ;;
  *) echo "usage: $0 micro | controls | quick" >&2; exit 2 ;;
esac
