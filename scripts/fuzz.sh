#!/usr/bin/env bash
# Runs the property tests of every parser of outside bytes (see
# "Parsers of outside bytes" in ARCHITECTURE.md) for longer than the normal
# suite does: rounds of TRELLIS_FUZZ_CASES cases per property (default
# 2000; each round draws fresh random inputs) until SECONDS (default 300)
# have passed.
#
#   bash scripts/fuzz.sh [SECONDS]
#
# A failing case is shrunk and saved by proptest as a regression file
# beside its test (`<crate>/proptest-regressions/**.txt` for unit tests,
# `<crate>/tests/<file>.proptest-regressions` for integration tests); every
# later run, the normal suite included, replays it first. Commit it with the
# fix, and add the minimized input as a named #[test].
set -euo pipefail

budget="${1:-300}"
cases="${TRELLIS_FUZZ_CASES:-2000}"
cd "$(dirname "$0")/.."
export TRELLIS_FUZZ_CASES="$cases" PROPTEST_CASES="$cases"

suites=(
    "-p trellis-engine --lib -- fuzz_tests"
    "-p trellis-engine --test it -- fuzz_config::"
    "-p trellis-lsp --bin trellis -- fuzz_tests framing::tests"
    "-p trellis-prompts --test it -- fuzz_files::"
    "-p trellis-prompt-codegen --test it -- fuzz_section::"
)

# Build first, so the budget is spent fuzzing.
for suite in "${suites[@]}"; do
    read -r -a args <<<"$suite"
    cargo test --quiet --no-run "${args[@]}"
done

start=$SECONDS
round=0
while ((SECONDS - start < budget)); do
    round=$((round + 1))
    for suite in "${suites[@]}"; do
        read -r -a args <<<"$suite"
        if ! cargo test --quiet "${args[@]}"; then
            echo "fuzz: round $round of \`cargo test $suite\` failed; the shrunk input is saved in:" >&2
            git status --short --untracked-files=all -- '*proptest-regressions*' >&2
            exit 1
        fi
        ((SECONDS - start < budget)) || break
    done
done
echo "fuzz: $round round(s) of $cases cases per property in $((SECONDS - start)) s, no failure"
