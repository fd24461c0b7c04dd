#!/usr/bin/env bash
# `make memcached-cli`: runs bin/cluster's memcached-cli image as a pod of the
# local cluster (so it reaches the Service by its DNS name, as the cache's
# clients do), waits for it to finish, prints what it printed and deletes it.
#
# Usage: scripts/memcached-cli.sh SERVER ARGS...   (KUBECONFIG)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[[ $# -ge 2 ]] || die "usage: make memcached-cli ARGS=\"set KEY VALUE | get KEY | stats [NAME]\" [MEMCACHED=host:port]"
server=$1
shift
kubectl="$root/bin/kubectl"
image=$(cd "$root" && bin/cluster images | sed -n 's/^CLIENT_IMAGE=//p') ||
  die "the local cluster has no real nodes: run 'make cluster-up REAL_NODES=3' (or 'make run')"
pod=memcached-cli-$$
"$kubectl" run "$pod" --restart=Never --image="$image" --quiet -- -server "$server" -retry 30s "$@" >/dev/null
trap '"$kubectl" delete pod "$pod" --wait=false >/dev/null 2>&1 || true' EXIT
"$kubectl" wait "pod/$pod" --for=jsonpath='{.status.phase}'=Succeeded --timeout=60s >/dev/null 2>&1 || true
"$kubectl" logs "pod/$pod"
[[ $("$kubectl" get "pod/$pod" -o jsonpath='{.status.phase}') == Succeeded ]]
