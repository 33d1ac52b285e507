#!/usr/bin/env bash
# The reference runs of 2026-11-25, as they were made (from the repository's root, after
# `cargo build --release`). Each writes results/reference/amd-epyc-2vcpu-linux-6.18/NAME/ and
# NAME.log; --duration 2 shortens the figure experiments' 120 s points (their reports say so).
set -euo pipefail
out=results/reference/amd-epyc-2vcpu-linux-6.18
evlab=target/release/evlab
run() { # NAME EXPERIMENT [FLAGS...]
  local name=$1; shift
  rm -rf "${out:?}/$name"
  "$evlab" run "$@" --quiet --out "$out/$name" 2>&1 | tee "$out/$name.log"
}
case "${1:-all}" in
  quick)
    run quick-run1 quick
    run quick-run2 quick
    run quick-placebo quick --placebo
    ;;
  knee)
    # quick with its capacity search (after the rule change recorded in docs/findings.md).
    run quick-knee-run1 quick
    run quick-knee-run2 quick
    run quick-knee-placebo quick --placebo
    ;;
  knee2)
    # quick again after a knee step that measured the client became one to repeat.
    run quick-knee-run3 quick
    run quick-knee-run4 quick
    ;;
  rest)
    # The experiments without a 3-trial reference run yet, at 2 s points (their reports say
    # so); new directories beside the older runs that the docs quote.
    run fig-proxy-cpu-2s fig-proxy-cpu --duration 2
    run herd-serve-2s herd-serve --duration 2
    run lse-deadconn-2s lse-deadconn --duration 2
    run fig2-specweb fig2-specweb --duration 2
    run peers peers --duration 2
    run fig6-specweb-idle fig6-specweb-idle --duration 2
    ;;
  figures)
    for e in fig1-one-byte fig3-epoll-variants fig7-accept-limit table1-syscalls fig5-one-byte-idle; do
      run "$e" "$e" --duration 2
    done
    ;;
  judged)
    # The two runs that judge the rules added on 2026-11-25 (third session) before they ran
    # (fig5-select-below-epoll-lt, fig5-poll-below-epoll-lt), and the micro-benchmarks whose
    # rules then became intervals over rounds.
    run quick-knee-run5 quick
    run quick-knee-run6 quick
    run herd herd
    run malloc malloc
    run quick-knee-placebo2 quick --placebo
    ;;
  figures-knee)
    # Figures 1 and 3 after they gained the capacity search (their "no difference" rules read
    # capacities, as quick's do); beside the earlier runs without it.
    run fig1-one-byte-knee fig1-one-byte --duration 2
    run fig3-epoll-variants-knee fig3-epoll-variants --duration 2
    ;;
  readahead)
    # The read-ahead micro-benchmark, first run after its rules were written.
    run readahead readahead
    ;;
  *) echo "usage: $0 quick | knee | knee2 | rest | figures | judged | figures-knee | readahead" >&2; exit 2 ;;
esac
