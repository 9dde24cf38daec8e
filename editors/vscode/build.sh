#!/usr/bin/env bash
# Install the locked dependencies, type-check, run the unit tests and package
# the extension as trellis-vscode-<version>.vsix. Needs Node 20+ and npm.
set -euo pipefail
cd "$(dirname "$0")"

npm ci --no-audit --no-fund
npm run typecheck
npm test
npm run package
ls -l ./*.vsix
