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
# Upstream components, built as upstream builds them: no Go experiments.
export CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=mod GOEXPERIMENT=

MAJOR="$(echo "${K8S_VERSION#v}" | cut -d. -f1)"
MINOR="$(echo "${K8S_VERSION#v}" | cut -d. -f2)"
# Without these stamps /version reports v0.0.0 and version-skew checks misbehave.
K8S_LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=${K8S_VERSION} -X k8s.io/component-base/version.gitMajor=${MAJOR} -X k8s.io/component-base/version.gitMinor=${MINOR} -X k8s.io/component-base/version.gitTreeState=clean"

# Build times of the last build, per binary, for the progress estimate.
TIMINGS="${ROOT}/bin/controlplane/timings"
last_time() { [[ -f "${TIMINGS}" ]] && awk -v b="$1" '$1 == b {print $2}' "${TIMINGS}" || true; }
human() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# build NAME DIR ARGS...: go build in DIR, with a progress line every 15 s
# saying how long it has taken and how long it took last time.
declare -A took
build() {
	local name="$1" dir="$2"
	shift 2
	local prev est="" t0 pid elapsed
	prev="$(last_time "${name}")"
	[[ -n "${prev}" ]] && est=" (last build took $(human "${prev}"))"
	log "building ${name}${est}"
	t0=$(date +%s)
	(cd "${dir}" && go build -trimpath "$@") &
	pid=$!
	while ! wait_for "${pid}" 15; do
		elapsed=$(($(date +%s) - t0))
		log "  still building ${name}: $(human "${elapsed}")${est}"
	done
	wait "${pid}"
	took[${name}]=$(($(date +%s) - t0))
	log "  built ${name} in $(human "${took[${name}]}")"
}
# wait_for PID SECONDS: true once PID has exited, false after SECONDS.
wait_for() {
	local i
	for ((i = 0; i < $2 * 5; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.2
	done
	return 1
}

start=$(date +%s)
log "building kube-apiserver ${K8S_VERSION}, kubectl ${K8S_VERSION} and etcd ${ETCD_VERSION} from Go modules into bin/ (once; cached after)"
build etcd "${SRC}/etcd" -ldflags "-s -w" -o "${OUT}.tmp/etcd" .
build kube-apiserver "${SRC}/k8s" -ldflags "${K8S_LDFLAGS}" -o "${OUT}.tmp/kube-apiserver" ./kube-apiserver
build kubectl "${SRC}/k8s" -ldflags "${K8S_LDFLAGS}" -o "${OUT}.tmp/kubectl" ./kubectl
for name in "${!took[@]}"; do echo "${name} ${took[${name}]}"; done | LC_ALL=C sort >"${TIMINGS}"
rm -rf "${OUT}"
mv "${OUT}.tmp" "${OUT}"
log "built in $(human $(($(date +%s) - start))) into ${OUT}"
echo "${OUT}"
