#!/usr/bin/env bash
# Pins every k8s.io staging module that k8s.io/kubernetes lists to the
# matching published v0.x release in tools/go.mod.
#
# k8s.io/kubernetes is not meant to be imported: its go.mod replaces the
# staging modules (k8s.io/api, k8s.io/client-go, ...) with ./staging paths that
# do not exist outside its own repository, and requires them at v0.0.0. A
# module that builds its commands must redirect each one to the published
# release. The list changes between Kubernetes minors, so it is read from the
# module's own go.mod instead of being typed by hand.
#
# Usage: scripts/tools-replaces.sh [KUBERNETES_VERSION]   (default: the version tools/go.mod requires)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/tools"
export GOWORK=off GOFLAGS=-mod=mod

kube_version=${1:-$(cd "$tools" && go list -m -f '{{.Version}}' k8s.io/kubernetes 2>/dev/null || true)}
if [[ ! $kube_version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]]; then
  echo "tools-replaces: need a Kubernetes release like v1.37.2, got '${kube_version}'" >&2
  exit 2
fi
staging_version="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"

gomod=$(cd "$tools" && go mod download -json "k8s.io/kubernetes@${kube_version}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[[ -f $gomod ]] || { echo "tools-replaces: cannot download the go.mod of k8s.io/kubernetes@${kube_version}" >&2; exit 1; }

# Replace entries look like: k8s.io/api => ./staging/src/k8s.io/api
mapfile -t staging < <(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/.*#\1#p' "$gomod" | sort -u)
[[ ${#staging[@]} -gt 0 ]] || { echo "tools-replaces: no staging replaces found in $gomod" >&2; exit 1; }

args=()
for m in "${staging[@]}"; do args+=("-replace=${m}=${m}@${staging_version}"); done
(cd "$tools" && go mod edit "${args[@]}")
echo "tools-replaces: pinned ${#staging[@]} staging modules of k8s.io/kubernetes ${kube_version} to ${staging_version}"
