#!/usr/bin/env bash
# Code-action latency benchmark: a real `trellis lsp` over stdio, 200
# didChange notifications each followed by a codeAction request while a
# repair runs (lsp/examples/bench_code_actions.rs). Prints p50/p99/max.
#
#   bench/code_actions.sh [--changes N] [--pace-ms N]
#
# Needs cargo on PATH (the server senses and repairs a tiny crate). Builds
# the server and the benchmark with --release.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --release -p trellis-lsp --bin trellis --example bench_code_actions
target=${CARGO_TARGET_DIR:-target}/release
exec "$target/examples/bench_code_actions" "$target/trellis" "$@"
