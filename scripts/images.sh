#!/usr/bin/env bash
# The seed's step 6, without Docker: `make docker-build` cross-compiles the
# manager and set-image-replicas for linux/amd64 and linux/arm64 into OCI
# image indexes (dist/images/<name>, OCI layouts, with SBOMs attached);
# `make docker-push IMG=...` pushes the manager to IMG and set-image-replicas
# beside it (FN_IMG, default: the same registry path and tag).
#
# Usage: scripts/images.sh build|push      (VERSION, IMG, FN_IMG)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[[ -x $root/bin/image ]] || die "bin/image is missing: run 'make build' first"
dist=$root/dist/images

build() {
  local version=${VERSION:?VERSION is required} c
  for c in manager set-image-replicas; do
    "$root/bin/image" build --repo "$root" --component "$c" --version "$version" --out "$dist/$c" >/dev/null
  done
}

push() {
  local img=${IMG:?give IMG=registry/path/memcached-operator:tag}
  [[ ${img##*/} == *:* ]] || die "IMG=$img has no tag: give registry/path/memcached-operator:tag"
  local fn_img=${FN_IMG:-${img%/*}/set-image-replicas:${img##*:}}
  "$root/bin/image" push --layout "$dist/manager" --ref "$img"
  "$root/bin/image" push --layout "$dist/set-image-replicas" --ref "$fn_img"
}

case ${1:-} in
  build) build ;;
  push) push ;;
  *) die "usage: $0 build|push" ;;
esac
