# shellcheck shell=bash
# Sourced at the top of ci/test and ci/lab-run (before they change directory, so $0 still
# names them): the lab (network namespaces)
# and the kind cluster (dockerd, image build) need root. Run as root, they go on; run as a
# user, they run themselves again through sudo, keeping the user's PATH and rustup toolchains
# (root's own HOME holds the caches, so nothing in the user's home becomes root's). Without
# sudo and without root they stop and say so.
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null; then
    echo "$0: needs root (network namespaces, dockerd); run it as root, or install sudo" >&2
    exit 1
  fi
  echo "$0: not root: running it again through sudo" >&2
  as_root_env=("PATH=$PATH" "RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}")
  while IFS= read -r as_root_kv; do as_root_env+=("$as_root_kv"); done \
    < <(env | grep -E '^(CI|FUZZ_SECONDS|GOFLAGS|GOPROXY|(FAULTLINE|LAB|KIND|BENCH|FANOUT|SCALE)_[A-Z_]*)=')
  exec sudo env "${as_root_env[@]}" "$0" "$@"
fi
