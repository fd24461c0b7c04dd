#!/usr/bin/env bash
# Packages the generated chart and pushes it to oci://$REGISTRY/charts as
# an OCI artifact, with the helm CLI from bin/ (plain HTTP only where
# bin/image allows it: this machine or a private address), then signs the pushed digest (COSIGN_KEY). A
# release VERSION (v0.2.0) packages the chart as that version; any other
# keeps Chart.yaml's. Prints the reference to install.
#
# Usage: REGISTRY=localhost:5000 [VERSION=v0.2.0] scripts/helm-push.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
registry=${REGISTRY:-localhost:5000}
helm=$root/bin/helm
[[ -x $helm ]] || die "bin/helm is missing: run 'make tools' first"
[[ -x $root/bin/image ]] || die "bin/image is missing: run 'make build' first"
check_signing_key
chart=$root/deploy/helm/memcached-operator
out=$root/dist/charts
mkdir -p "$out"
flags=()
if [[ ${VERSION:-} =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  flags+=(--version "${VERSION#v}" --app-version "$VERSION")
fi
pkg=$("$helm" package "$chart" --destination "$out" "${flags[@]}" | sed -n 's/^Successfully packaged chart and saved it to: //p')
[[ -f $pkg ]] || die "helm package wrote no chart archive"
flags=()
if "$root/bin/image" plain-http --registry "$registry" 2>/dev/null; then flags+=(--plain-http); fi
"$helm" push "$pkg" "oci://$registry/charts" "${flags[@]}" >&2
version=$(basename "$pkg" .tgz); version=${version#memcached-operator-}
# Signed by the digest the registry serves for the version just pushed.
digest=$("$root/bin/image" digest --ref "$registry/charts/memcached-operator:${version//+/_}")
"$root/bin/image" sign --ref "$registry/charts/memcached-operator@$digest" >&2
echo "helm install memcached-operator oci://$registry/charts/memcached-operator --version $version --namespace memcached-operator-system --create-namespace"
