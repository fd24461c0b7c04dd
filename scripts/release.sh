#!/usr/bin/env bash
# A release, with real digests: builds both images for VERSION, pushes them
# to REGISTRY by tag, resolves their digests from the registry, signs each
# digest and attests its provenance and SBOMs (COSIGN_KEY), then `bin/pins
# release` writes dist/install.yaml (kubebuilder's build-installer: CRD, RBAC
# and manager, pinned by digest, for one `kubectl apply -f`) and, with ENV,
# pins that environment to the release's tag@digest; with TAG=1 also commits
# those pins and tags the commit VERSION, the tag staging and prod follow
# (docs/environments.md).
#
# Usage: VERSION=v0.2.0 REGISTRY=localhost:5000 [ENV=staging [TAG=1]] scripts/release.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
version=${VERSION:?VERSION is required, such as v0.2.0}
registry=${REGISTRY:?REGISTRY is required, such as localhost:5000 or ghcr.io/you}
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "VERSION=$version: want a release version such as v0.2.0 or v0.2.0-rc.1"
[[ -x $root/bin/pins ]] || die "bin/pins is missing: run 'make build' first"
check_signing_key
if [[ -n ${TAG:-} ]]; then
  [[ -n ${ENV:-} ]] || die "TAG=1 needs ENV: the tag marks the commit that pins that environment to the release"
  # Before anything is pushed: a tag environments follow is never moved.
  ! git -C "$root" rev-parse -q --verify "refs/tags/$version" >/dev/null || die "tag $version exists; release another VERSION"
fi
start=$SECONDS

echo "release: building $version for linux/amd64 and linux/arm64 ..."
VERSION=$version "$root/scripts/images.sh" build
manager_ref=$("$root/bin/image" push --layout "$root/dist/images/manager" --ref "$registry/memcached-operator:$version")
function_ref=$("$root/bin/image" push --layout "$root/dist/images/set-image-replicas" --ref "$registry/set-image-replicas:$version")
# The digests the registry serves, not the ones computed here.
manager_digest=$("$root/bin/image" digest --ref "$registry/memcached-operator:$version")
function_digest=$("$root/bin/image" digest --ref "$registry/set-image-replicas:$version")
[[ $manager_ref == *"@$manager_digest" && $function_ref == *"@$function_digest" ]] || die "the registry serves other digests than were pushed ($manager_digest, $function_digest)"
echo "release: signing and attesting both images ..."
"$root/bin/image" sign --layout "$root/dist/images/manager" --ref "$manager_ref"
"$root/bin/image" sign --layout "$root/dist/images/set-image-replicas" --ref "$function_ref"

"$root/bin/pins" -C "$root" release -registry "$registry" -version "$version" -digest "$manager_digest" ${ENV:+-env "$ENV"} ${TAG:+-tag}
echo "release: $version in $((SECONDS - start))s"
echo "  $registry/memcached-operator:$version@$manager_digest"
echo "  $registry/set-image-replicas:$version@$function_digest"
