#!/usr/bin/env bash
# A local Kubernetes cluster with nothing but bin/: kube-apiserver, etcd,
# kube-controller-manager, kube-scheduler and kwok's fake nodes, started by
# kwokctl's binary runtime. Deployments get real ReplicaSets and Pods that
# are scheduled onto the fake nodes and go Running and Ready; no container
# actually runs. Used by `make run`, `make cluster-up/down` and the e2e tests.
#
# Usage: scripts/cluster.sh up|down
# Environment:
#   CLUSTER_NAME        cluster name (default: memcached)
#   KWOK_WORKDIR        kwokctl's state directory (default: .work/kwok)
#   CLUSTER_KUBECONFIG  kubeconfig to write (default: .work/kubeconfig)
#   NODES               fake nodes (default: 3)
#   KWOK_ARGS           extra `kwokctl create cluster` flags
set -euo pipefail
source "$(dirname "$0")/lib.sh"

name=${CLUSTER_NAME:-memcached}
export KWOK_WORKDIR=${KWOK_WORKDIR:-$root/.work/kwok}
kubeconfig=${CLUSTER_KUBECONFIG:-$root/.work/kubeconfig}
nodes=${NODES:-3}
dir=$KWOK_WORKDIR/clusters/$name
log=$KWOK_WORKDIR/kwokctl-$name.log
kwokctl="$root/bin/kwokctl"
# kwokctl shells out to `kubectl` from PATH (and would download one without
# it): make it use bin/kubectl.
export PATH="$root/bin:$PATH"

say() { echo "cluster: $*" >&2; }
elapsed() { echo "$((SECONDS - $1))s"; }

need_binaries() {
  local b missing=()
  for b in kwokctl kwok kube-apiserver etcd kube-controller-manager kube-scheduler kubectl; do
    [[ -x $root/bin/$b ]] || missing+=("$b")
  done
  [[ ${#missing[@]} -eq 0 ]] || die "missing in bin/: ${missing[*]}; run 'make tools' (it builds them from the Go module proxy)"
}

kwokctl_failed() {
  echo "cluster: kwokctl $1 failed; last lines of its log ($log):" >&2
  # kwokctl logs JSON; show level, message and error of each line.
  tail -n 15 "$log" | sed -E 's/.*"level":"([A-Z]+)".*"msg":"([^"]*)"(.*"err":"([^"]*)")?.*/  \1 \2 \4/' >&2 || true
  [[ -d $dir/logs ]] && echo "cluster: component logs: $dir/logs/ (or: KWOK_WORKDIR=$KWOK_WORKDIR $kwokctl logs --name $name kube-apiserver)" >&2
  exit 1
}

reachable() {
  [[ -f $kubeconfig ]] && "$root/bin/kubectl" --kubeconfig "$kubeconfig" --request-timeout=3s get --raw /readyz >/dev/null 2>&1
}

up() {
  need_binaries
  mkdir -p "$KWOK_WORKDIR" "$(dirname "$kubeconfig")"
  local t0=$SECONDS
  if [[ -d $dir ]]; then
    if reachable; then
      say "reusing cluster '$name'"
    else
      say "cluster '$name' exists but does not answer; restarting its components"
      # Stop first: after a crash some components may still run without the
      # others (an apiserver without its etcd), and start skips those.
      "$kwokctl" stop cluster --name "$name" >>"$log" 2>&1 || true
      "$kwokctl" start cluster --name "$name" --wait 180s >>"$log" 2>&1 || {
        echo "cluster: the cluster directory $dir looks stale (left by a crash or another machine): run 'make cluster-down' and try again" >&2
        kwokctl_failed "start cluster"
      }
      reachable || die "cluster '$name' started but its apiserver does not answer; run 'make cluster-down' and try again (logs: $dir/logs/)"
      say "started cluster '$name' in $(elapsed "$t0")"
    fi
  else
    say "creating cluster '$name': kube-apiserver, etcd, kube-controller-manager, kube-scheduler and kwok from bin/ ..."
    # kwokctl picks each port by scanning down from 32767 for one that is
    # free now and binds it later, so two clusters created at the same time
    # (parallel tests) can pick the same port: one creation at a time on
    # this machine. A created cluster holds its ports.
    exec {create_lock}>"${TMPDIR:-/tmp}/memcached-operator-kwok-create.lock"
    flock "$create_lock"
    # shellcheck disable=SC2086 # KWOK_ARGS is a list of flags
    "$kwokctl" create cluster --name "$name" --runtime binary --kubeconfig "$kubeconfig" \
      --kube-apiserver-binary "$root/bin/kube-apiserver" \
      --etcd-binary "$root/bin/etcd" \
      --kube-controller-manager-binary "$root/bin/kube-controller-manager" \
      --kube-scheduler-binary "$root/bin/kube-scheduler" \
      --kwok-controller-binary "$root/bin/kwok" \
      --wait 180s ${KWOK_ARGS:-} >"$log" 2>&1 || kwokctl_failed "create cluster"
    # kwokctl exits 0 even when its wait for readiness timed out.
    reachable || kwokctl_failed "create cluster"
    flock --unlock "$create_lock"
    say "created cluster '$name' in $(elapsed "$t0")"
  fi
  if [[ $nodes -gt 0 ]]; then
    "$kwokctl" scale node --name "$name" --replicas "$nodes" >>"$log" 2>&1 || kwokctl_failed "scale node"
  fi
  say "ready with $nodes fake nodes; point kubectl at it with: export KUBECONFIG=$kubeconfig"
}

down() {
  if [[ ! -d $dir ]]; then
    say "no cluster '$name'"
  else
    "$kwokctl" delete cluster --name "$name" >>"$log" 2>&1 || kwokctl_failed "delete cluster"
    say "deleted cluster '$name'"
  fi
  rm -f "$kubeconfig" "$log"
}

case ${1:-} in
  up) up ;;
  down) down ;;
  *) die "usage: $0 up|down" ;;
esac
