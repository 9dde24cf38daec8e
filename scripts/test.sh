#!/usr/bin/env bash
# Runs every test of the project, the full tier: installs what the tests
# need, checks formatting and lints, runs the Rust suites (unit, property,
# integration and LSP end-to-end against the built binary, with the real
# toolchains: the `toolchain-tests` feature), then the editor suites (Neovim
# headless, pytest-lsp client replays, the VS Code extension).
# Plain `cargo test` is the fast tier: no real toolchain, a few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "installing test dependencies"
bash scripts/install-test-deps.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings

step "cargo test"
# Branch slots of the tests live in a private cache, never the user's.
# A cache made here is removed on exit, whatever the outcome.
if [[ -z ${TRELLIS_CACHE_DIR:-} ]]; then
    TRELLIS_CACHE_DIR=$(mktemp -d)
    trap 'rm -rf "$TRELLIS_CACHE_DIR"' EXIT
fi
export TRELLIS_CACHE_DIR
# Every cargo command below selects the same packages, features and
# targets, so none of them builds the workspace again.
selection=(--locked --workspace --all-features)
cargo test "${selection[@]}" --no-fail-fast

step "cargo test, on a kernel without the sandbox (simulated)"
# The sandbox probe fails as it does without Landlock and user namespaces:
# the CLI's repairs, the language server's, and the sandbox's own refusals.
TRELLIS_FAILPOINT=sandbox-probe:1:fail \
    cargo test "${selection[@]}" --test it -- \
        --skip prompts_cli:: cli:: lsp_repair:: sandbox::

step "editor tests"
# The binary the tests above ran (`--all-targets`: with the features the
# test builds unified, so nothing is compiled again).
cargo build "${selection[@]}" --all-targets
TRELLIS_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/trellis" bash scripts/test-editors.sh
