#!/usr/bin/env bash
# Checks everything `make test` and `make run` need before anything is built,
# so no one waits minutes to learn that something was missing. On Debian and
# Ubuntu, what is missing is installed with apt-get when this runs as root or
# with passwordless sudo; otherwise it stops with the one command to run.
#
# Usage: hack/prereqs.sh [command=package ...]  (more commands to require, with
# the Debian package that provides each)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# command=Debian package. setpriv (util-linux) gives the control plane's
# processes a parent-death signal, so they cannot outlive the process that
# started them. Node.js and npm run the third-party MCP software the gateway
# tests drive (test/interop, installed with npm ci from its lockfile).
# Chromium runs the console's browser tests (chromedp drives it).
required=(redis-server=redis-server setpriv=util-linux node=nodejs npm=npm chromium=chromium "$@")

log() { echo "prereqs: $*" >&2; }

# Go, at the version go.mod asks for: the one thing this script cannot install.
want_go="$(awk '/^go /{print $2; exit}' "${ROOT}/go.mod")"
if ! command -v go >/dev/null; then
	log "Go ${want_go} or newer is required and not in PATH: install it from https://go.dev/doc/install"
	exit 1
fi
have_go="$(go env GOVERSION)"
have_go="${have_go#go}"
if [[ "$(printf '%s\n%s\n' "${want_go}" "${have_go}" | sort -V | head -n1)" != "${want_go}" ]]; then
	log "Go ${want_go} or newer is required, found ${have_go}: install a newer one from https://go.dev/doc/install"
	exit 1
fi

missing_cmds=()
missing_pkgs=()
for pair in "${required[@]}"; do
	cmd="${pair%%=*}"
	pkg="${pair#*=}"
	if ! command -v "${cmd}" >/dev/null; then
		missing_cmds+=("${cmd}")
		missing_pkgs+=("${pkg}")
	fi
done
((${#missing_cmds[@]})) || exit 0

install_cmd="sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing_pkgs[*]}"
if ! command -v apt-get >/dev/null; then
	log "missing: ${missing_cmds[*]}. Install them with your system's package manager (on Debian or Ubuntu: ${install_cmd}), then run make again."
	exit 1
fi
SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then
	if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
		SUDO=(sudo -n)
	else
		log "missing: ${missing_cmds[*]}. Install them, then run make again:"
		log "  ${install_cmd}"
		exit 1
	fi
fi
log "installing ${missing_pkgs[*]} (missing: ${missing_cmds[*]})"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing_pkgs[@]}" >/dev/null
for cmd in "${missing_cmds[@]}"; do
	if ! command -v "${cmd}" >/dev/null; then
		log "installed ${missing_pkgs[*]} but ${cmd} is still not in PATH"
		exit 1
	fi
done
log "installed ${missing_pkgs[*]}"
