#!/usr/bin/env bash
# Install the locked dependencies, type-check, run the unit tests and package
# the extension as trellis-vscode-<version>.vsix: one esbuild bundle
# (out/extension.js) and package.json, no node_modules. Needs Node 20+, npm
# and python3 (to list the package).
set -euo pipefail
cd "$(dirname "$0")"

npm ci --no-audit --no-fund
npm run typecheck
npm test
rm -rf out
npm run package
vsix=trellis-vscode-$(node -p 'require("./package.json").version').vsix
# The bundle must be all the extension needs at run time.
python3 - "$vsix" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
shipped = [n for n in names if n.startswith("extension/")]
print("\n".join(shipped))
bad = [n for n in shipped if "node_modules" in n or n.endswith(".ts") or "/out/test/" in n]
if bad or "extension/out/extension.js" not in shipped:
    sys.exit(f"the .vsix must ship out/extension.js and no node_modules, sources or tests; found {bad or shipped}")
PY
ls -l "$vsix"
