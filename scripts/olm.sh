#!/usr/bin/env bash
# Publishes the operator for OLM, without Docker: builds the bundle image
# (bundle/, as bundle.Dockerfile describes it) and pushes it, renders the
# file-based catalog with this release's bundle pinned by the digest just
# pushed (dist/catalog, from the committed catalog/ so earlier releases
# stay in the upgrade graph), validates it as `opm validate` does, then
# builds and pushes the catalog image (opm serving /configs); both images
# are signed with their provenance attested (COSIGN_KEY). Prints what a
# cluster with OLM applies (dist/olm-install.yaml, from hack/olm): the
# CatalogSource of the catalog image by digest, the install namespace, its
# OperatorGroup and the Subscription.
#
# Usage: VERSION=v0.1.0 REGISTRY=localhost:5000 scripts/olm.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[[ -x $root/bin/image ]] || die "bin/image is missing: run 'make build' first"
[[ -x $root/bin/opm ]] || die "bin/opm is missing: run 'make tools' first"
version=${VERSION:?VERSION is required, such as v0.1.0}
registry=${REGISTRY:?REGISTRY is required, such as localhost:5000}
check_signing_key
dist=$root/dist
start=$SECONDS

echo "olm: building the bundle image $version ..." >&2
"$root/bin/image" build --repo "$root" --component bundle --version "$version" --out "$dist/images/bundle" >/dev/null
bundle_ref=$("$root/bin/image" push --layout "$dist/images/bundle" --ref "$registry/memcached-operator-bundle:$version")
bundle_pinned="$registry/memcached-operator-bundle@${bundle_ref##*@}"
"$root/bin/image" sign --layout "$dist/images/bundle" --ref "$bundle_ref"

echo "olm: rendering the catalog with $bundle_pinned ..." >&2
rm -rf "$dist/catalog"
(cd "$root" && BUNDLE_IMAGE=$bundle_pinned CATALOG_OUT=$dist/catalog go run ./hack/cmd/generate catalog >&2)
"$root/bin/opm" validate "$dist/catalog"

echo "olm: building the catalog image $version (linux/amd64, linux/arm64) ..." >&2
"$root/bin/image" build --repo "$root" --component catalog --version "$version" --files "/configs=dist/catalog" --out "$dist/images/catalog" >/dev/null
catalog_ref=$("$root/bin/image" push --layout "$dist/images/catalog" --ref "$registry/memcached-operator-catalog:$version")
"$root/bin/image" sign --layout "$dist/images/catalog" --ref "$catalog_ref"
echo "olm: published in $((SECONDS - start))s: ${bundle_ref} and ${catalog_ref}" >&2
(cd "$root" && CATALOG_IMAGE=$catalog_ref go run ./hack/cmd/generate olm-install >&2)
cat "$dist/olm-install.yaml"
