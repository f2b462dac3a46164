# shellcheck shell=bash
# shellcheck disable=SC2034,SC2016  # variables are used by the sourcing scripts; sh -c bodies are literal
# Shared helpers of the faultline local lab (ci/lab/*). Sourced, never executed.
# Everything here only touches the lab's own network namespaces (fl-lab-*), their /etc
# overlays (/etc/netns/fl-lab-*), its bridge (fl-lab-br0), its veths (fl-lab-v*), its subnet
# and processes whose pids it recorded.

LAB_LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LAB_REPO="$(cd "$LAB_LIB_DIR/../.." && pwd)"
# shellcheck source=ci/lab/versions.env
. "$LAB_LIB_DIR/versions.env"

LAB_DIR="${LAB_DIR:-$LAB_REPO/target/lab}"
LAB_CACHE="${FAULTLINE_LAB_CACHE:-$HOME/.cache/faultline-lab}"
LAB_BRIDGE=fl-lab-br0
LAB_HOST_IP="$LAB_SUBNET_PREFIX.1"
LAB_BASTION=lab-bastion              # a jump host, not a Kubernetes node
LAB_BASTION_IP="$LAB_SUBNET_PREFIX.10"
LAB_BASTION_VETH=fl-lab-vb
LAB_API_PORT=6443
LAB_ETCD_CLIENT=127.0.0.1:23790     # off the usual 2379 so it never clashes
LAB_ETCD_BRIDGE_CLIENT="$LAB_HOST_IP:23790"   # for the control-plane nodes' API servers only
LAB_ETCD_PEER=127.0.0.1:23800
LAB_PIDS="$LAB_DIR/pids"
LAB_LOGS="$LAB_DIR/logs"
LAB_PKI="$LAB_DIR/pki"
LAB_KUBECONFIG="$LAB_DIR/kubeconfig"
LAB_NODES_FILE="$LAB_DIR/nodes.list"   # "name address role index" per line, written by up
LAB_BIN="$LAB_DIR/bin"
KUBECTL="$LAB_BIN/kubectl"

log()  { printf '%s lab: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die()  { printf '%s lab: ERROR: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; exit 1; }
need_root() { [[ $(id -u) == 0 ]] || die "the lab needs root (network namespaces, bridge, sshd); run: sudo $0 $*"; }

valid_node_name() { [[ "$1" =~ ^[a-z0-9-]+$ ]] || die "invalid node name: '$1' (want ^[a-z0-9-]+\$)"; }

# ---------------------------------------------------------------- timers
# The node-monitor grace period kube-controller-manager uses when no flag sets it: 40 s
# before v1.32, 50 s since (kubernetes PR #126287).
k8s_default_grace() {
  local minor="${K8S_VERSION#v1.}"
  minor="${minor%%.*}"
  if (( minor < 32 )); then echo 40s; else echo 50s; fi
}

# Sets the preset's values as shell variables. TIMER_FLAGS=1: the control plane is started
# with flags setting them; 0 (preset `defaults`): with no timer flag at all, so the release's
# own defaults apply, and the values here are those defaults (what the inventory states).
lab_timers() {
  TIMER_FLAGS=1
  case "${1:-$LAB_TIMERS}" in
    defaults)
      TIMER_FLAGS=0
      TIMER_NODE_MONITOR_PERIOD=5s
      TIMER_NODE_MONITOR_GRACE="$(k8s_default_grace)"
      TIMER_NODE_STARTUP_GRACE=1m0s
      TIMER_UNREACHABLE_TOLERATION=300
      TIMER_NOTREADY_TOLERATION=300
      TIMER_LEASE_SECONDS=40          # kubelet default; renewed every 10 s
      TIMER_H2_READ_IDLE=30           # client-go defaults
      TIMER_H2_PING=15
      ;;
    fast)
      TIMER_NODE_MONITOR_PERIOD=2s
      TIMER_NODE_MONITOR_GRACE=20s
      TIMER_NODE_STARTUP_GRACE=30s
      TIMER_UNREACHABLE_TOLERATION=30
      TIMER_NOTREADY_TOLERATION=30
      TIMER_LEASE_SECONDS=10          # kwok renews every lease/4 = 2.5 s, well inside the 20 s grace
      TIMER_H2_READ_IDLE=5            # kwok's client-go notices a dead connection (partition) in ~8 s
      TIMER_H2_PING=3
      ;;
    real)
      TIMER_NODE_MONITOR_PERIOD=5s
      TIMER_NODE_MONITOR_GRACE=50s
      TIMER_NODE_STARTUP_GRACE=1m0s
      TIMER_UNREACHABLE_TOLERATION=300
      TIMER_NOTREADY_TOLERATION=300
      TIMER_LEASE_SECONDS=40          # kubelet default; renewed every 10 s
      TIMER_H2_READ_IDLE=30           # client-go defaults
      TIMER_H2_PING=15
      ;;
    *) die "LAB_TIMERS must be fast, real or defaults, not '${1:-$LAB_TIMERS}'" ;;
  esac
}

# The preset a running lab was started with (target/lab/env), else LAB_TIMERS.
lab_load_env() {
  if [[ -f "$LAB_DIR/env" ]]; then
    # shellcheck disable=SC1091
    . "$LAB_DIR/env"
  fi
  lab_timers "$LAB_TIMERS"
}

# ---------------------------------------------------------------- binaries
lab_bin_dirs() { "$LAB_LIB_DIR/build" --print-dirs; }

lab_link_bins() {
  local d b
  mkdir -p "$LAB_BIN"
  while read -r d; do
    for b in "$d"/*; do [[ -x "$b" ]] && ln -sfn "$b" "$LAB_BIN/$(basename "$b")"; done
  done < <(lab_bin_dirs)
}

# ---------------------------------------------------------------- processes
# Pid files hold "PID STARTTIME"; a pid only counts as ours if /proc/PID/stat still shows
# the same start time (pids get reused).
proc_starttime() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  # shellcheck disable=SC2086
  set -- $stat
  [[ "$1" != Z && "$1" != X ]] || return 1   # a zombie is dead, whoever reaps it
  printf '%s\n' "${20}"
}

pidfile_of() { printf '%s/%s.pid\n' "$LAB_PIDS" "$1"; }

# record NAME PID
record_pid() {
  local st
  mkdir -p "$LAB_PIDS"
  st="$(proc_starttime "$2")" || { [[ "${START_PROC_SHORT:-0}" == 1 ]] && return 1; die "process $1 ($2) died at once; see $LAB_LOGS/$1.log"; }
  printf '%s %s\n' "$2" "$st" >"$(pidfile_of "$1")"
}

# live_pid NAME: prints the pid if the recorded process is still the same one.
live_pid() {
  local f pid st cur
  f="$(pidfile_of "$1")"
  [[ -f "$f" ]] || return 1
  read -r pid st <"$f" || return 1
  [[ -n "${pid:-}" && -n "${st:-}" ]] || return 1
  cur="$(proc_starttime "$pid")" || return 1
  [[ "$cur" == "$st" ]] || return 1
  printf '%s\n' "$pid"
}

# start_proc NAME CMD...: detached (own session), output to logs/NAME.log, pid recorded.
# START_PROC_SHORT=1: the process may legitimately be done already (no error then).
start_proc() {
  local name="$1" pid
  shift
  mkdir -p "$LAB_LOGS"
  printf '\n=== %s starting: %s\n' "$(date -u +%FT%TZ)" "$*" >>"$LAB_LOGS/$name.log"
  setsid "$@" </dev/null >>"$LAB_LOGS/$name.log" 2>&1 9>&- &
  pid=$!
  if [[ "${START_PROC_SHORT:-0}" == 1 ]]; then
    record_pid "$name" "$pid" 2>/dev/null || true
    return 0
  fi
  sleep 0.2
  record_pid "$name" "$pid"
}

# stop_proc NAME [SIGNAL]: stops the recorded process (only if it is still ours).
stop_proc() {
  local name="$1" sig="${2:-TERM}" pid i
  if pid="$(live_pid "$name")"; then
    kill "-$sig" "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      live_pid "$name" >/dev/null || break
      sleep 0.1
    done
    if live_pid "$name" >/dev/null; then kill -KILL "$pid" 2>/dev/null || true; sleep 0.2; fi
  fi
  rm -f "$(pidfile_of "$name")"
}

# wait_for DESCRIPTION TIMEOUT_SECONDS CMD...: polls CMD every 0.5 s.
wait_for() {
  local what="$1" timeout="$2" start
  shift 2
  start=$(date +%s)
  until "$@" >/dev/null 2>&1; do
    (( $(date +%s) - start < timeout )) || { log "timed out after ${timeout}s waiting for $what"; return 1; }
    sleep 0.5
  done
}

# ---------------------------------------------------------------- nodes
lab_netns()  { printf 'fl-%s\n' "$1"; }            # lab-worker-1 -> fl-lab-worker-1
lab_hostveth() { printf 'fl-lab-v%s\n' "$1"; }     # by index: fl-lab-v1 ...
lab_nodedir() { printf '%s/nodes/%s\n' "$LAB_DIR" "$1"; }

# Write nodes.list from LAB_WORKERS / LAB_CONTROL_PLANE_NODES (workers first: .11, .12, ...).
lab_plan_nodes() {
  local i idx=0 n="$LAB_WORKERS" c="$LAB_CONTROL_PLANE_NODES"
  [[ "$n" =~ ^[0-9]+$ && "$c" =~ ^[0-9]+$ ]] || die "LAB_WORKERS/LAB_CONTROL_PLANE_NODES must be numbers"
  (( n + c >= 1 && n + c <= 100 )) || die "between 1 and 100 nodes, please"
  : >"$LAB_NODES_FILE.tmp"
  for ((i = 1; i <= n; i++)); do
    idx=$((idx + 1)); echo "lab-worker-$i $LAB_SUBNET_PREFIX.$((10 + idx)) worker $idx" >>"$LAB_NODES_FILE.tmp"
  done
  for ((i = 1; i <= c; i++)); do
    idx=$((idx + 1)); echo "lab-cp-$i $LAB_SUBNET_PREFIX.$((10 + idx)) control-plane $idx" >>"$LAB_NODES_FILE.tmp"
  done
  mv "$LAB_NODES_FILE.tmp" "$LAB_NODES_FILE"
}

lab_nodes() { [[ -f "$LAB_NODES_FILE" ]] && awk '{print $1}' "$LAB_NODES_FILE"; }

# node_info NODE -> sets NODE_ADDR NODE_ROLE NODE_IDX (dies if unknown)
node_info() {
  local line
  valid_node_name "$1"
  line="$(awk -v n="$1" '$1 == n' "$LAB_NODES_FILE" 2>/dev/null)"
  [[ -n "$line" ]] || die "no lab node named '$1' (see $LAB_NODES_FILE)"
  read -r _ NODE_ADDR NODE_ROLE NODE_IDX <<<"$line"
}

# Which node am I on? (used by node-ctl over SSH)
current_node() {
  local ns
  if [[ -n "${FAULTLINE_LAB_NODE:-}" ]]; then printf '%s\n' "$FAULTLINE_LAB_NODE"; return; fi
  ns="$(ip netns identify $$ 2>/dev/null || true)"
  if [[ "$ns" == fl-lab-* ]]; then printf '%s\n' "${ns#fl-}"; return; fi
  die "not on a lab node (no FAULTLINE_LAB_NODE, netns '${ns:-host}')"
}

# Run a command inside the node's network namespace with the node's hostname.
in_node() {
  local node="$1"
  shift
  ip netns exec "$(lab_netns "$node")" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$node" "$@"
}

# Host-side link operations. node-ctl runs inside a node's netns (reboot, power-off), where the
# bridge and host-side veths are invisible, so it enters the host netns through a process the
# lab started there (etcd, verified by start time).
host_ip() {
  local pid
  if pid="$(live_pid etcd)" && [[ "$(readlink "/proc/$pid/ns/net")" != "$(readlink /proc/self/ns/net)" ]]; then
    nsenter -t "$pid" -n ip "$@"
  else
    ip "$@"
  fi
}

node_net_up() {
  local node="$1" ns hv
  node_info "$node"
  ns="$(lab_netns "$node")"; hv="$(lab_hostveth "$NODE_IDX")"
  ip netns list | awk '{print $1}' | grep -qx "$ns" || ip netns add "$ns"
  if ! host_ip link show "$hv" >/dev/null 2>&1; then
    host_ip link add "$hv" type veth peer name eth0 netns "$ns"
    host_ip link set "$hv" master "$LAB_BRIDGE"
  fi
  host_ip link set "$hv" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr replace "$NODE_ADDR/24" dev eth0
  ip -n "$ns" link set eth0 up
}

node_net_down() {   # power off: the node's address goes dark
  local node="$1" ns
  node_info "$node"
  ns="$(lab_netns "$node")"
  ip -n "$ns" link set eth0 down 2>/dev/null || true
  host_ip link set "$(lab_hostveth "$NODE_IDX")" down 2>/dev/null || true
}

node_power_state() { cat "$(lab_nodedir "$1")/power" 2>/dev/null || echo off; }

# A node's configuration as `ci/lab/switch` set it; each switch's default when unset.
node_switch() {
  local v
  v="$(cat "$(lab_nodedir "$1")/switches/$2" 2>/dev/null || true)"
  if [[ -n "$v" ]]; then printf '%s\n' "$v"; return; fi
  case "$2" in
    kubelet-restart) echo no ;;
    sudo) echo host ;;
    *) die "unknown switch $2" ;;
  esac
}
set_power_state() { mkdir -p "$(lab_nodedir "$1")"; echo "$2" >"$(lab_nodedir "$1")/power"; }

# The machine's own /etc overlay: `ip netns exec fl-X` bind-mounts every file of
# /etc/netns/fl-X/ over /etc/ for what it runs, so each lab machine has the host's users plus
# LAB_SSH_USER (key login, passwordless sudo), its own sudoers, and its name in /etc/hosts.
# Nothing on the host itself changes; `down` removes the overlay with the namespace.
write_machine_etc() {
  local name="$1" addr="$2" etc u="$LAB_SSH_USER" home="$LAB_DIR/home/$LAB_SSH_USER"
  etc="/etc/netns/$(lab_netns "$name")"
  mkdir -p "$etc" "$home"
  chown "$LAB_SSH_UID:$LAB_SSH_UID" "$home"
  { grep -v "^$u:" /etc/passwd; echo "$u:x:$LAB_SSH_UID:$LAB_SSH_UID:faultline lab user:$home:/bin/sh"; } >"$etc/passwd"
  { grep -v "^$u:" /etc/group; echo "$u:x:$LAB_SSH_UID:"; } >"$etc/group"
  ( umask 077; { grep -v "^$u:" /etc/shadow; echo "$u:*:19000:0:99999:7:::"; } >"$etc/shadow" )
  { cat /etc/hosts; echo "$addr $name"; } >"$etc/hosts"
  cat >"$etc/sudoers" <<EOF
# sudoers of lab machine $name (generated by ci/lab; the host's is not the machine's)
Defaults env_reset
Defaults env_keep += "LAB_DIR FAULTLINE_LAB_NODE"
Defaults secure_path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
Defaults lecture=never
Defaults !fqdn
root ALL=(ALL:ALL) ALL
$u ALL=(ALL) NOPASSWD: ALL
EOF
  chmod 644 "$etc/passwd" "$etc/group" "$etc/hosts"
  chmod 440 "$etc/sudoers"
}

# The sshd_config lines every lab machine shares.
sshd_common_config() {
  cat <<EOF
PermitRootLogin prohibit-password
PubkeyAuthentication yes
AuthorizedKeysFile $LAB_DIR/ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
PrintLastLog no
UseDNS no
X11Forwarding no
Subsystem sftp internal-sftp
EOF
}

# Last in an sshd_config: LAB_SSH_USER reads its own copy of the authorized keys (sshd reads
# them as the user, who may not read root's).
sshd_user_match() {
  printf 'Match User %s\n    AuthorizedKeysFile %s\n' "$LAB_SSH_USER" "$LAB_DIR/ssh/authorized_keys.$LAB_SSH_USER"
}

# The bastion: a namespace on the bridge with only an sshd that forwards (no kubelet, not a
# node), at LAB_BASTION_IP.
bastion_up() {
  local ns d
  ns="$(lab_netns "$LAB_BASTION")"
  d="$(lab_nodedir "$LAB_BASTION")"
  ip netns list | awk '{print $1}' | grep -qx "$ns" || ip netns add "$ns"
  if ! ip link show "$LAB_BASTION_VETH" >/dev/null 2>&1; then
    ip link add "$LAB_BASTION_VETH" type veth peer name eth0 netns "$ns"
    ip link set "$LAB_BASTION_VETH" master "$LAB_BRIDGE"
  fi
  ip link set "$LAB_BASTION_VETH" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr replace "$LAB_BASTION_IP/24" dev eth0
  ip -n "$ns" link set eth0 up
  live_pid "$LAB_BASTION.sshd" >/dev/null && return 0
  mkdir -p /run/sshd
  start_proc "$LAB_BASTION.sshd" ip netns exec "$ns" unshare --uts \
    sh -c 'hostname "$0" && exec "$@"' "$LAB_BASTION" /usr/sbin/sshd -D -e -f "$d/sshd_config"
}

start_sshd() {
  local node="$1" d
  node_info "$node"
  live_pid "$node.sshd" >/dev/null && return 0
  d="$(lab_nodedir "$node")"
  mkdir -p /run/sshd   # privilege-separation dir hard-coded in Debian's sshd
  # The node's root shell must not run the host's ~/.bashrc: bash reads it for every SSH
  # command, and on this kind of host it may take locks (pyenv rehash) that a node power-off
  # would leave stale. Inside the node's own mount namespace (made by `ip netns exec`, not
  # propagated to the host) ~/.bashrc is covered by the lab's node rc file.
  printf '# shell rc of lab node %s (generated by ci/lab; the host rc is not the node'"'"'s)\n' "$node" >"$d/bashrc"
  start_proc "$node.sshd" ip netns exec "$(lab_netns "$node")" unshare --uts \
    sh -c 'hostname "$0" && rc="$(getent passwd root | cut -d: -f6)/.bashrc" &&
           { [ ! -e "$rc" ] || mount --bind "$1" "$rc"; } && shift && exec "$@"' \
    "$node" "$d/bashrc" /usr/sbin/sshd -D -e -f "$d/sshd_config"
}

# The node's "kubelet": re-registers the Node object if it is missing (as a kubelet does at
# start), then runs kwok for this node only, from the node's own address.
node_manifest() {
  local node="$1" role_label taint=""
  node_info "$node"
  if [[ "$NODE_ROLE" == control-plane ]]; then
    role_label='node-role.kubernetes.io/control-plane: ""'
    taint='  taints:
  - key: node-role.kubernetes.io/control-plane
    effect: NoSchedule'
  else
    role_label='node-role.kubernetes.io/worker: ""'
  fi
  cat <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $node
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
    faultline.dev/lab-address: "$NODE_ADDR"
  labels:
    kubernetes.io/hostname: $node
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    $role_label
    type: kwok
spec:
  podCIDR: 10.244.$NODE_IDX.0/24
  podCIDRs: [10.244.$NODE_IDX.0/24]
$taint
status:
  capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
  addresses:
  - {type: InternalIP, address: "$NODE_ADDR"}
  - {type: Hostname, address: "$node"}
  nodeInfo:
    kubeletVersion: $K8S_VERSION
    kubeProxyVersion: ""
    operatingSystem: linux
    architecture: amd64
    containerRuntimeVersion: kwok://$KWOK_VERSION
EOF
}

register_node() {   # bounded (~10 s) so `kubelet start` stays well inside a 60 s SSH command timeout
  local node="$1" deadline=$((SECONDS + 10))
  while ((SECONDS < deadline)); do
    if ip netns exec "$(lab_netns "$node")" "$KUBECTL" --kubeconfig "$LAB_KUBECONFIG" --request-timeout=3s \
         get node "$node" >/dev/null 2>&1; then return 0; fi
    if node_manifest "$node" | ip netns exec "$(lab_netns "$node")" "$KUBECTL" --kubeconfig "$LAB_KUBECONFIG" \
         --request-timeout=3s create -f - >/dev/null 2>>"$LAB_LOGS/$node.kubelet.log"; then
      log "registered Node $node"
      return 0
    fi
    sleep 2
  done
  log "WARNING: could not register Node $node (API server unreachable from $NODE_ADDR?); starting kwok anyway"
}

# One start or stop of a node's kubelet at a time (a run's undo and a self-restore firing
# together would both pass the "already running?" check, both start kwok, and leave one
# unrecorded: a kubelet `status` calls stopped while it heartbeats). The lock is fd 9 of a
# subshell; start_proc closes it for what it starts, so a kwok never holds it.
with_kubelet_lock() {
  local node="$1"
  shift
  mkdir -p "$LAB_PIDS"
  (
    flock -w 60 9 || die "kubelet of $node: its lock ($LAB_PIDS/$node.kubelet.lock) is held for 60 s"
    "$@" "$node"
  ) 9>>"$LAB_PIDS/$node.kubelet.lock"
}

start_kubelet() { with_kubelet_lock "$1" start_kubelet_locked; }

start_kubelet_locked() {
  local node="$1"
  lab_load_env
  node_info "$node"
  live_pid "$node.kubelet" >/dev/null && return 0
  register_node "$node"
  local log_offset=0
  [[ -f "$LAB_LOGS/$node.kubelet.log" ]] && log_offset="$(stat -c %s "$LAB_LOGS/$node.kubelet.log")"
  start_proc "$node.kubelet" ip netns exec "$(lab_netns "$node")" unshare --uts \
    sh -c 'hostname "$0" && exec "$@"' "$node" \
    env HTTP2_READ_IDLE_TIMEOUT_SECONDS="$TIMER_H2_READ_IDLE" HTTP2_PING_TIMEOUT_SECONDS="$TIMER_H2_PING" \
    "$LAB_BIN/kwok" \
    --config "$LAB_LIB_DIR/kwok.yaml" \
    --kubeconfig "$LAB_KUBECONFIG" \
    --manage-single-node "$node" \
    --node-ip "$NODE_ADDR" --node-name "$node" --node-port 10250 \
    --server-address "$NODE_ADDR:10250" \
    --cidr "10.244.$NODE_IDX.0/24" \
    --node-lease-duration-seconds "$TIMER_LEASE_SECONDS"
  # In the background, so `kubelet start` returns at once even when the API server is out of
  # reach (e.g. started while partitioned); it keeps trying for 2 minutes.
  stop_proc "$node.resync"
  START_PROC_SHORT=1 start_proc "$node.resync" bash -c '. "$1" && lab_load_env && kwok_resync "$2" "$3"' \
    resync "$LAB_LIB_DIR/lib.sh" "$node" "$log_offset"
}

lease_holder() {
  ip netns exec "$(lab_netns "$1")" "$KUBECTL" --kubeconfig "$LAB_KUBECONFIG" --request-timeout=3s \
    -n kube-node-lease get lease "$1" -o 'jsonpath={.spec.holderIdentity}' 2>/dev/null || true
}

# Work around a kwok v0.8.0 race: a restarted kwok (new random holder identity) takes the node
# lease over, queues a sync of the node's pods, and skips them all if its lease cache does not
# show it as holder yet; nothing re-queues them, so Terminating pods would never finish and
# pods bound while it was down would stay Pending. Once the lease is held by this kwok (its
# identity is in its log, after LOG_OFFSET), touch the pods that need the kubelet (an
# annotation) so kwok sees them again. A real kubelet also writes to its pods when it starts.
kwok_resync() {
  local node="$1" offset="$2" id="" h="" pods deadline=$((SECONDS + 120))
  local k=(ip netns exec "$(lab_netns "$node")" "$KUBECTL" --kubeconfig "$LAB_KUBECONFIG" --request-timeout=5s)
  while ((SECONDS < deadline)); do
    [[ -n "$id" ]] || id="$(tail -c "+$((offset + 1))" "$LAB_LOGS/$node.kubelet.log" 2>/dev/null |
      grep -o "\"id\":\"${node}_[^\"]*\"" | head -1 | cut -d'"' -f4)" || true
    if [[ -n "$id" ]]; then
      h="$(lease_holder "$node")"
      [[ "$h" == "$id" ]] && break
    fi
    sleep 0.5
  done
  [[ -n "$id" && "$h" == "$id" ]] || { log "WARNING: kwok on $node (id '${id:-?}') did not take its lease over; pods not re-synced"; return 0; }
  sleep 1
  pods="$("${k[@]}" get pods -A --field-selector "spec.nodeName=$node" --no-headers \
    -o 'custom-columns=NS:.metadata.namespace,N:.metadata.name,DEL:.metadata.deletionTimestamp,PHASE:.status.phase,READY:.status.conditions[?(@.type=="Ready")].status' 2>/dev/null |
    awk '$3 != "<none>" || $4 != "Running" || $5 != "True" {print $1 "/" $2}')" || true
  for p in $pods; do
    "${k[@]}" -n "${p%%/*}" annotate pod "${p#*/}" --overwrite "faultline.dev/lab-kubelet-started=$(date -u +%FT%TZ)" >/dev/null 2>&1 || true
  done
  [[ -z "$pods" ]] || log "kubelet $node: re-synced $(wc -w <<<"$pods") pod(s) kwok skipped at start"
}

stop_kubelet() { with_kubelet_lock "$1" stop_kubelet_locked; }
stop_kubelet_locked() { stop_proc "$1.resync"; stop_proc "$1.kubelet"; }

# Power on: link up, sshd, kubelet. Each boot gets a new boot id (nodes/<node>/boot_id,
# what `node-ctl boot-id` prints): the lab's nodes share the host's kernel, so the
# kernel's own boot id never changes when a lab node "reboots".
node_power_on() {
  local node="$1"
  node_net_up "$node"
  set_power_state "$node" on
  cat /proc/sys/kernel/random/uuid >"$(lab_nodedir "$node")/boot_id"
  start_sshd "$node"
  [[ "$NODE_ROLE" != control-plane ]] || start_node_apiserver "$node"
  start_kubelet "$node"
}

# Kill every process in the node's network namespace (sshd, its sessions, kwok, ...)
# except the caller ($1 = pid to spare). Recorded pid files are dropped.
node_kill_all() {
  local node="$1" spare="${2:-}" ns p i
  ns="$(lab_netns "$node")"
  stop_proc "$node.kubelet-restart" KILL
  stop_proc "$node.resync" KILL
  stop_proc "$node.kubelet" KILL   # power loss: nobody gets to shut down cleanly
  stop_proc "$node.apiserver" KILL
  stop_proc "$node.sshd" KILL
  for i in 1 2 3; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do
      [[ "$p" == "$spare" || "$p" == "$$" || "$p" == "$BASHPID" ]] && continue
      kill -KILL "$p" 2>/dev/null || true
    done
    sleep 0.2
  done
}

node_power_off() {
  local node="$1"
  node_info "$node"
  set_power_state "$node" off
  node_net_down "$node"     # dark first: no "connection refused" window, like pulling the plug
  node_kill_all "$node" "${2:-}"
}

# ---------------------------------------------------------------- control plane
kube() { "$KUBECTL" --kubeconfig "$LAB_KUBECONFIG" "$@"; }

apiserver_ready() { kube --request-timeout=3s get --raw /readyz >/dev/null 2>&1; }

# Flags every lab API server shares (the host's and each control-plane node's).
apiserver_flags() {
  printf '%s\n' \
    --service-cluster-ip-range="$LAB_SERVICE_CIDR" \
    --client-ca-file="$LAB_PKI/ca.crt" \
    --kubelet-client-certificate="$LAB_PKI/admin.crt" --kubelet-client-key="$LAB_PKI/admin.key" \
    --service-account-key-file="$LAB_PKI/sa.pub" \
    --service-account-signing-key-file="$LAB_PKI/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --authorization-mode=RBAC --allow-privileged=true \
    --profiling=false --v=1
  # Streaming lists (the WatchList gate: off by default in v1.33, on in v1.32 and from
  # v1.34). Off here as in an upstream v1.33; the scale lab turns it on to measure both.
  if [[ "${LAB_WATCHLIST:-0}" == 1 ]]; then
    printf '%s\n' --feature-gates=WatchList=true
  fi
  if [[ "$TIMER_FLAGS" == 1 ]]; then
    printf '%s\n' \
      --default-unreachable-toleration-seconds="$TIMER_UNREACHABLE_TOLERATION" \
      --default-not-ready-toleration-seconds="$TIMER_NOTREADY_TOLERATION"
  fi
}

# kube-controller-manager's timer flags (none under the `defaults` preset).
controller_manager_timer_flags() {
  [[ "$TIMER_FLAGS" == 1 ]] || return 0
  printf '%s\n' \
    --node-monitor-period="$TIMER_NODE_MONITOR_PERIOD" \
    --node-monitor-grace-period="$TIMER_NODE_MONITOR_GRACE" \
    --node-startup-grace-period="$TIMER_NODE_STARTUP_GRACE"
}

start_apiserver() {
  lab_load_env
  live_pid apiserver >/dev/null && return 0
  local flags
  mapfile -t flags < <(apiserver_flags)
  start_proc apiserver "$LAB_BIN/kube-apiserver" \
    --advertise-address="$LAB_HOST_IP" --bind-address="$LAB_HOST_IP" --secure-port="$LAB_API_PORT" \
    --etcd-servers="http://$LAB_ETCD_CLIENT" \
    --tls-cert-file="$LAB_PKI/apiserver.crt" --tls-private-key-file="$LAB_PKI/apiserver.key" \
    "${flags[@]}"
  wait_for "kube-apiserver /readyz" 90 apiserver_ready || die "kube-apiserver not ready; see $LAB_LOGS/apiserver.log"
}

# A control-plane node's own API server, in the node's namespace on the node's address (as
# on a kubeadm control-plane node): it goes down with the node, and the cluster's
# `kubernetes` endpoints list it while it is up. Its serving certificate names the node's
# address. Not waited for: a node boots in the background, like a real one.
start_node_apiserver() {
  local node="$1" flags
  lab_load_env
  node_info "$node"
  live_pid "$node.apiserver" >/dev/null && return 0
  node_apiserver_cert "$node"
  mapfile -t flags < <(apiserver_flags)
  start_proc "$node.apiserver" ip netns exec "$(lab_netns "$node")" "$LAB_BIN/kube-apiserver" \
    --advertise-address="$NODE_ADDR" --bind-address="$NODE_ADDR" --secure-port="$LAB_API_PORT" \
    --etcd-servers="http://$LAB_ETCD_BRIDGE_CLIENT" \
    --tls-cert-file="$LAB_PKI/$node-apiserver.crt" --tls-private-key-file="$LAB_PKI/$node-apiserver.key" \
    "${flags[@]}"
}

node_apiserver_cert() {
  local node="$1"
  node_info "$node"
  [[ -f "$LAB_PKI/$node-apiserver.crt" ]] && return 0
  (
    cd "$LAB_PKI"
    umask 077
    openssl req -newkey rsa:2048 -nodes -keyout "$node-apiserver.key" -out "$node-apiserver.csr" \
      -subj "/CN=kube-apiserver-$node" 2>/dev/null
    printf 'subjectAltName=IP:%s,IP:%s,DNS:%s,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n' \
      "$NODE_ADDR" "$LAB_SERVICE_IP" "$node" >"$node-apiserver.ext"
    openssl x509 -req -in "$node-apiserver.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile "$node-apiserver.ext" -out "$node-apiserver.crt" 2>/dev/null
    rm -f "$node-apiserver.csr" "$node-apiserver.ext"
  )
}

# A kubeconfig like the lab's, whose server is NODE's own API server (kubeadm's admin.conf on
# a control-plane node looks like this): for running through an endpoint that can go down.
write_node_kubeconfig() {
  local node="$1" out
  node_info "$node"
  out="$LAB_DIR/kubeconfig-$node"
  sed "s#server: https://$LAB_HOST_IP:$LAB_API_PORT#server: https://$NODE_ADDR:$LAB_API_PORT#" \
    "$LAB_KUBECONFIG" >"$out.tmp"
  chmod 600 "$out.tmp"
  mv "$out.tmp" "$out"
}

stop_apiserver() { stop_proc apiserver; }
