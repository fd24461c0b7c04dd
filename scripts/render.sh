#!/usr/bin/env bash
# Renders overlays/ENV as `make render` prints it and `make deploy` applies
# it. With IMG set (the seed's `export IMG=...; make docker-build
# docker-push; make deploy`), the manager runs IMG instead of the overlay's
# pin, through set-image-replicas on the rendered output: the overlay's files
# are not changed, since their pins are what GitOps deploys.
#
# Usage: [IMG=registry/path/memcached-operator:tag[@digest]] scripts/render.sh ENV
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[[ $# -eq 1 ]] || die "usage: $0 ENV"
dir=$(overlay_dir "$1")
if [[ -z ${IMG:-} ]]; then
  exec "$root/bin/kustomize" build "$dir"
fi
[[ -x $fn ]] || die "bin/set-image-replicas is missing: run 'make build' first"
split_ref "$IMG"
# The manager's repository in the rendered output: the newName of the
# overlay's operator pin (after make retarget), else the base's name.
current=$(awk '
  /^- name: / { operator = ($3 == "registry.example.com/memcached-operator"); next }
  operator && /^  newName: / { gsub(/"/, "", $2); print $2; exit }
  /^[^ ]/ { operator = 0 }' "$dir/images.yaml")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  cat <<CFG
apiVersion: fn.cache.example.com/v1alpha1
kind: SetImageReplicas
metadata:
  name: img
failOnEmptyMatch: true
images:
- name: ${current:-registry.example.com/memcached-operator}
  newName: $ref_name
CFG
  [[ -z $ref_tag ]] || echo "  newTag: \"$ref_tag\""
  if [[ -n $ref_digest ]]; then
    echo "  digest: $ref_digest"
  else
    # IMG replaces the pin, a digest-pinned one (prod) included.
    echo "  dropDigest: true"
  fi
} > "$tmp/img.yaml"
"$root/bin/kustomize" build "$dir" > "$tmp/rendered.yaml"
"$fn" --quiet "$tmp/img.yaml" "$tmp/rendered.yaml"
