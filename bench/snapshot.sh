#!/usr/bin/env bash
# Snapshot benchmark: snapshot root vs `git add -A && git write-tree` (cold),
# warm re-root vs cold (watched, as in the language server; and a new
# process with the stat cache, for information), and eager copy vs `cp -a`,
# on a generated 10,000-file tree. Prints a table of medians and ratios.
#
#   bench/snapshot.sh [--files N] [--runs N]
#
# Needs git and cp on PATH. Builds the benchmark with --release.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --release -p trellis-engine --example bench_snapshot
exec "${CARGO_TARGET_DIR:-target}/release/examples/bench_snapshot" "$@"
