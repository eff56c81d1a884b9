#!/usr/bin/env bash
# Regenerates the reference token ids and vectors with the Node reference
# implementation (versions pinned in package.json and package-lock.json).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/../../.." && pwd)"
command -v npm >/dev/null || { echo "generate.sh: npm is needed (apt-get install npm)" >&2; exit 1; }
cd "${here}"
npm ci --no-audit --no-fund --silent
node generate.mjs "${root}/pkg/toolcatalog/builtin/use/testdata/reference.json"
