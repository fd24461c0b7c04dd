#!/usr/bin/env bash
# `make run`: the operator on a cluster, in the foreground, with the
# tutorial's Memcached. By default the cluster is the local one from
# bin/cluster (hack/cluster; created on first use, reused afterwards): three
# real nodes where the machine allows (Linux, root, containerd and friends
# installable), so the Memcached becomes three running memcached processes;
# otherwise kwok's fake nodes, and it says why. With CLUSTER=current it is the
# cluster of $KUBECONFIG / the current context.
#
# Environment: CLUSTER (local|current), REAL_NODES (3; 0 for fake nodes),
# METRICS_ADDR (:8443), PROBE_ADDR (:8081), MEMCACHED_IMAGE and
# EXPORTER_IMAGE (the manager's default images instead of the production
# ones: for CLUSTER=current on a cluster that cannot pull those, such as an
# air-gapped one or a local one, whose images `bin/cluster images` prints
# in this form), and bin/cluster's variables.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

start=$SECONDS
step() { echo "run: $* ($((SECONDS - start))s)" >&2; }
kubectl="$root/bin/kubectl"
manager="$root/bin/manager"
metrics_addr=${METRICS_ADDR:-:8443}
probe_addr=${PROBE_ADDR:-:8081}

[[ -x $manager && -x $kubectl && -x $root/bin/cluster ]] || die "bin/manager, bin/cluster or bin/kubectl is missing: run 'make tools build'"

# A port already taken makes the manager exit at once with a bind error;
# say which and how to move it.
port_free() {
  local port=${1##*:}
  [[ $port == 0 ]] && return 0
  ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
}
port_free "$metrics_addr" || die "port ${metrics_addr##*:} is in use (another 'make run'?): stop it, or run 'make run METRICS_ADDR=:18443'"
port_free "$probe_addr" || die "port ${probe_addr##*:} is in use (another 'make run'?): stop it, or run 'make run PROBE_ADDR=:18081'"

case ${CLUSTER:-local} in
  current)
    "$kubectl" --request-timeout=5s get --raw /readyz >/dev/null 2>&1 ||
      die "CLUSTER=current, but the cluster of ${KUBECONFIG:-~/.kube/config} does not answer: check 'kubectl cluster-info', or drop CLUSTER=current for a local cluster"
    step "using the current cluster ($("$kubectl" config current-context 2>/dev/null || echo "\$KUBECONFIG"))"
    ;;
  local)
    if [[ -z ${REAL_NODES:-} ]]; then
      if [[ $(uname -s) != Linux || $(id -u) -ne 0 ]]; then
        echo "run: real nodes need Linux and root; using kwok's fake nodes (pods are scheduled and go Ready, nothing runs)" >&2
        export REAL_NODES=0
      elif ! "$root/scripts/test-deps.sh" nodes 2>/tmp/run-test-deps.log; then
        echo "run: real nodes need containerd, runc and the CNI plugins ($(tail -n 1 /tmp/run-test-deps.log)); using kwok's fake nodes" >&2
        export REAL_NODES=0
      else
        export REAL_NODES=3
      fi
    fi
    (cd "$root" && bin/cluster up)
    export KUBECONFIG=${CLUSTER_KUBECONFIG:-$root/.work/kubeconfig}
    if [[ $REAL_NODES -gt 0 ]]; then
      # The nodes hold these images (nothing is pulled): the operator's
      # defaults point at them, the production defaults stay as they are.
      images=$(cd "$root" && bin/cluster images)
      manager_images=(--memcached-image="$(sed -n 's/^MEMCACHED_IMAGE=//p' <<<"$images")" --exporter-image="$(sed -n 's/^EXPORTER_IMAGE=//p' <<<"$images")")
    fi
    ;;
  *) die "CLUSTER=${CLUSTER}: want 'local' (the default) or 'current'" ;;
esac
# Given images win over the local nodes' (the manager takes a flag's last value).
[[ -z ${MEMCACHED_IMAGE:-} ]] || manager_images+=(--memcached-image="$MEMCACHED_IMAGE")
[[ -z ${EXPORTER_IMAGE:-} ]] || manager_images+=(--exporter-image="$EXPORTER_IMAGE")

step "installing the namespace, CRD and RBAC (make install)"
out=$(make --no-print-directory -s -C "$root" install 2>&1) || { echo "$out" >&2; die "make install failed (output above)"; }
step "applying deploy/samples/memcached-sample.yaml"
"$kubectl" apply --server-side -f "$root/deploy/samples/memcached-sample.yaml" >/dev/null

# Report from the Memcached's own status once it is Ready, while the manager
# logs in the foreground.
(
  if "$kubectl" wait --for=condition=Ready memcached/memcached-sample --timeout=180s >/dev/null 2>&1; then
    status=$("$kubectl" get memcached/memcached-sample -o jsonpath='{.status.readyReplicas}/{.spec.size} Ready: {.status.conditions[?(@.type=="Ready")].message}')
    cat >&2 <<EOF

run: memcached-sample is $status ($((SECONDS - start))s)
run: try, in another terminal:
       export KUBECONFIG=${KUBECONFIG:-~/.kube/config}
       make memcached-cli ARGS="set greeting hello"     # from a pod, through the Service's DNS name
       make memcached-cli ARGS="get greeting"
       bin/kubectl port-forward svc/memcached-sample 11211:11211   # then: nc 127.0.0.1 11211
       bin/kubectl get memcached
       bin/kubectl scale memcached/memcached-sample --replicas=5
       bin/kubectl get pods -l app.kubernetes.io/instance=memcached-sample -o wide
       bin/kubectl delete memcached/memcached-sample
run: Ctrl-C stops the manager; 'make cluster-down' deletes the local cluster.

EOF
  else
    echo "run: memcached-sample is not Ready after 180s; see the manager's log above and 'bin/kubectl describe memcached/memcached-sample'" >&2
  fi
) &

step "starting bin/manager (Ctrl-C to stop)"
exec "$manager" ${manager_images[@]+"${manager_images[@]}"} --zap-encoder=console --zap-time-encoding=iso8601 \
  --metrics-bind-address="$metrics_addr" --health-probe-bind-address="$probe_addr"
