#!/usr/bin/env bash
# Installs the programs the tests run for real that are not Go modules, so a
# fresh Debian or Ubuntu machine (CI runs as root there) needs nothing done
# by hand:
#   memcached  Debian's memcached, for test/memcached (the operator's pod
#              templates against the real server) and the local cluster's
#              memcached image, and python3-pymemcache, for the Python
#              client example test/memcached runs (docs/examples);
#   nodes      containerd, runc, the CNI plugins, iptables and nft, for the
#              local cluster's real nodes (kubelets from bin/) and the test
#              that proves they leave the machine as they found it;
#   argocd     redis-server, Argo CD's cache, for test/e2e's run of the
#              real Argo CD.
# Elsewhere it fails with the packages to install; it never skips.
#
# Usage: scripts/test-deps.sh [memcached|nodes|argocd]...   (default: all)
set -euo pipefail
exec 1>&2

# command or file=package
declare -A sets=(
  [memcached]="memcached=memcached /usr/bin/python3=python3 /usr/lib/python3/dist-packages/pymemcache=python3-pymemcache"
  [nodes]="containerd=containerd ctr=containerd runc=runc /usr/lib/cni/bridge=containernetworking-plugins /usr/lib/cni/host-local=containernetworking-plugins /usr/lib/cni/loopback=containernetworking-plugins iptables=iptables nft=nftables ip=iproute2 nsenter=util-linux"
  [argocd]="redis-server=redis-server"
)
[[ $# -gt 0 ]] || set -- memcached nodes argocd

present() { if [[ $1 == /* ]]; then [[ -x $1 ]]; else command -v "$1" >/dev/null 2>&1; fi; }

missing=()
for set in "$@"; do
  [[ -n ${sets[$set]:-} ]] || { echo "test-deps: unknown set '$set' (memcached, nodes or argocd)" >&2; exit 2; }
  for dep in ${sets[$set]}; do
    pkg=${dep#*=}
    present "${dep%%=*}" || [[ " ${missing[*]} " == *" $pkg "* ]] || missing+=("$pkg")
  done
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "test-deps: present ($*)"
  exit 0
fi

if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  echo "test-deps: missing ${missing[*]}: install the Debian/Ubuntu package(s) (sudo apt-get install ${missing[*]}) or your system's equivalent, then try again" >&2
  exit 1
fi

start=$SECONDS
echo "test-deps: installing Debian package(s) ${missing[*]} with apt-get ..."
export DEBIAN_FRONTEND=noninteractive
# A containerd.service the package may start is left alone: each node of the
# local cluster runs its own containerd, with its own socket and state.
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >/tmp/test-deps-apt.log 2>&1; then
  tail -n 20 /tmp/test-deps-apt.log >&2
  echo "test-deps: FAILED to install ${missing[*]} with apt-get (log: /tmp/test-deps-apt.log); install them by hand and try again" >&2
  exit 1
fi
echo "test-deps: installed ${missing[*]} in $((SECONDS - start))s"
