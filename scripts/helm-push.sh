#!/usr/bin/env bash
# Packages the generated chart and pushes it to oci://$REGISTRY/charts as
# an OCI artifact, with the helm CLI from bin/ (plain HTTP only for a
# registry on localhost). Prints the reference to install.
#
# Usage: REGISTRY=localhost:5000 scripts/helm-push.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
registry=${REGISTRY:-localhost:5000}
helm=$root/bin/helm
[[ -x $helm ]] || die "bin/helm is missing: run 'make tools' first"
chart=$root/deploy/helm/memcached-operator
out=$root/dist/charts
mkdir -p "$out"
pkg=$("$helm" package "$chart" --destination "$out" | sed -n 's/^Successfully packaged chart and saved it to: //p')
[[ -f $pkg ]] || die "helm package wrote no chart archive"
flags=()
case $registry in localhost:*|127.0.0.1:*|\[::1\]:*) flags+=(--plain-http) ;; esac
"$helm" push "$pkg" "oci://$registry/charts" "${flags[@]}" >&2
version=$(basename "$pkg" .tgz); version=${version#memcached-operator-}
echo "helm install memcached-operator oci://$registry/charts/memcached-operator --version $version --namespace memcached-operator-system --create-namespace"
