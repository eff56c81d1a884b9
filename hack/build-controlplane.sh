#!/usr/bin/env bash
# Builds kube-apiserver, etcd and kubectl for envtest from Go modules (no
# prebuilt binaries are downloaded) and prints the directory holding them, to
# be used as KUBEBUILDER_ASSETS.
#
# The binaries are cached under bin/controlplane/<versions>-<inputs hash>/ and
# rebuilt only when the pinned versions or the builder modules change.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="${ROOT}/hack/controlplane"
K8S_VERSION="$(cd "${SRC}/k8s" && GOWORK=off go list -m -f "{{.Version}}" k8s.io/kubernetes)"
ETCD_VERSION="$(cd "${SRC}/etcd" && GOWORK=off go list -m -f "{{.Version}}" go.etcd.io/etcd/server/v3)"
if [[ -z "${K8S_VERSION}" || -z "${ETCD_VERSION}" ]]; then
	echo "build-controlplane: cannot read pinned versions from ${SRC}/*/go.mod" >&2
	exit 1
fi

INPUTS_HASH="$( (go env GOVERSION; cd "${SRC}" && find . -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) | LC_ALL=C sort | xargs sha256sum) | sha256sum | cut -c1-12)"
OUT="${ROOT}/bin/controlplane/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}-${INPUTS_HASH}"

if [[ -x "${OUT}/kube-apiserver" && -x "${OUT}/etcd" && -x "${OUT}/kubectl" ]]; then
	echo "${OUT}"
	exit 0
fi

mkdir -p "${OUT}.tmp"
log() { echo "build-controlplane: $*" >&2; }
export CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=mod

MAJOR="$(echo "${K8S_VERSION#v}" | cut -d. -f1)"
MINOR="$(echo "${K8S_VERSION#v}" | cut -d. -f2)"
# Without these stamps /version reports v0.0.0 and version-skew checks misbehave.
K8S_LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=${K8S_VERSION} -X k8s.io/component-base/version.gitMajor=${MAJOR} -X k8s.io/component-base/version.gitMinor=${MINOR} -X k8s.io/component-base/version.gitTreeState=clean"

start=$(date +%s)
log "building kube-apiserver ${K8S_VERSION}, kubectl ${K8S_VERSION} and etcd ${ETCD_VERSION} (first build takes several minutes)"
(cd "${SRC}/etcd" && go build -trimpath -ldflags "-s -w" -o "${OUT}.tmp/etcd" .)
(cd "${SRC}/k8s" && go build -trimpath -ldflags "${K8S_LDFLAGS}" -o "${OUT}.tmp/kube-apiserver" ./kube-apiserver)
(cd "${SRC}/k8s" && go build -trimpath -ldflags "${K8S_LDFLAGS}" -o "${OUT}.tmp/kubectl" ./kubectl)
rm -rf "${OUT}"
mv "${OUT}.tmp" "${OUT}"
log "built in $(( $(date +%s) - start ))s into ${OUT}"
echo "${OUT}"
