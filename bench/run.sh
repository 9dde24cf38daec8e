#!/usr/bin/env bash
# Every benchmark, each against its named baseline, median of several runs:
#   1. snapshot root vs `git add -A && git write-tree`; watched re-root vs cold;
#      eager copy vs `cp -a` (a generated 10,000-file tree);
#   2. a branch measurement vs an in-place incremental `cargo check`;
#   3. code-action latency in the language server while the user types and
#      a repair runs (goal: p99 under 20 ms);
#   4. on two crates with 36 crates.io packages the user has built (53
#      lines; a generated library of 2,100): the first `trellis repair`
#      from a cold cache, the language server's first diagnostics and a
#      warm repair, each vs the user's in-place cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash bench/snapshot.sh "$@"
echo
cargo build --quiet --release -p trellis-engine --example bench_branch
"${CARGO_TARGET_DIR:-target}/release/examples/bench_branch"
echo
bash bench/code_actions.sh
echo
# Only --runs applies there (--files sizes the snapshot tree).
runs=()
while [ $# -gt 0 ]; do
  if [ "$1" = --runs ]; then runs=(--runs "$2"); fi
  shift
done
bash bench/deps.sh "${runs[@]}"
