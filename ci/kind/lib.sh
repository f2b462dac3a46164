# shellcheck shell=bash
# shellcheck disable=SC2034  # variables are used by the sourcing scripts
# Shared helpers of the faultline kind cluster (ci/kind/*). Sourced, never executed.
# Everything here touches only its own things: the dockerd it started (by recorded pid),
# the kind cluster named $KIND_CLUSTER_NAME, and images tagged faultline-kind/*.

KIND_LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KIND_REPO="$(cd "$KIND_LIB_DIR/../.." && pwd)"
# shellcheck source=ci/lab/versions.env
. "$KIND_REPO/ci/lab/versions.env"
# shellcheck source=ci/kind/versions.env
. "$KIND_LIB_DIR/versions.env"

KIND_DIR="${KIND_DIR:-$KIND_REPO/target/kind}"
KIND_CACHE="${FAULTLINE_KIND_CACHE:-$HOME/.cache/faultline-kind}"
KIND_LOGS="$KIND_DIR/logs"
KIND_KUBECONFIG="$KIND_DIR/kubeconfig"
KIND_ENGINE_DIR="$KIND_DIR/engine"          # daemon.json, dockerd.pid when we started it
KIND_BIN="$KIND_CACHE/kind-$KIND_VERSION/bin/kind"

log()  { printf '%s kind: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die()  { printf '%s kind: ERROR: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; exit 1; }

# Run as root directly, or through sudo when there is one (a user with sudo).
as_root() {
  if [[ $(id -u) == 0 ]]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else die "needs root for: $*"; fi
}

# Debian packages the scripts need on the host, installed when missing.
ensure_packages() {
  local p missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  log "installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

engine_answers() { docker info >/dev/null 2>&1; }

# The node image's tag: Kubernetes version plus a hash of everything that goes into it
# (the node/ files, CoreDNS's module, the build script, the pinned versions), so a change
# rebuilds it.
node_image_tag() {
  local h
  h=$(cat "$KIND_LIB_DIR/build" "$KIND_LIB_DIR/versions.env" "$KIND_REPO/ci/lab/versions.env" \
        $(find "$KIND_LIB_DIR/node" "$KIND_LIB_DIR/coredns" -type f | sort) | sha256sum | cut -c1-12)
  printf 'faultline-kind/node:%s-%s' "$K8S_VERSION" "$h"
}

kind_cmd() { "$KIND_BIN" "$@"; }
# Whether kind lists the faultline cluster. The list is read whole before it is searched: a
# `grep -q` that stops at its match can end kind with SIGPIPE while it still writes, and
# under pipefail that reads as "no such cluster".
kind_cluster_listed() {
  local clusters
  [[ -x "$KIND_BIN" ]] || return 1
  clusters="$("$KIND_BIN" get clusters 2>/dev/null)" || return 1
  grep -qx "$KIND_CLUSTER_NAME" <<<"$clusters"
}
# kind itself, built from its Go module and cached by version; needed whether or not the node
# image is (a node image already in Docker's store says nothing about this cache).
ensure_kind_bin() {
  [[ -x "$KIND_BIN" ]] && return 0
  log "building kind $KIND_VERSION"
  mkdir -p "$(dirname "$KIND_BIN")"
  (cd "$(mktemp -d)" && GOBIN="$(dirname "$KIND_BIN")" CGO_ENABLED=0 go install "sigs.k8s.io/kind@$KIND_VERSION")
}
# Binaries built by ci/lab/build (kubectl, kubeadm, ...), shared with the netns lab.
KIND_KUBE_BIN="${FAULTLINE_LAB_CACHE:-$HOME/.cache/faultline-lab}/kubernetes-$K8S_VERSION/bin"
kubectl_kind() { "$KIND_KUBE_BIN/kubectl" --kubeconfig "$KIND_KUBECONFIG" "$@"; }
