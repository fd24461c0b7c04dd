#!/usr/bin/env bash
# Pins images and replica counts of one environment: updates the overlay's
# images.yaml / replicas.yaml and renders them into its kustomizations.
# Only images and workloads the overlay already pins can be changed (a typo
# fails instead of adding a pin nobody uses).
#
# Usage: scripts/pin.sh ENV [IMAGE...]
#   IMAGE is repository[:tag][@digest], e.g.
#     registry.example.com/memcached-operator:v0.2.0@sha256:<64 hex>
#   RESOLVE=1 pins each IMAGE given by tag by the digest its registry serves
#   (the registry of the repository named, over TLS with your docker
#   credentials; plain HTTP on localhost), instead of a digest typed by hand.
#   REPLICAS="Kind/name=count ..." pins replica counts, e.g.
#     REPLICAS="Memcached/app-cache=5 Deployment/memcached-operator-controller-manager=2"
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[[ $# -ge 1 ]] || die "usage: $0 ENV [IMAGE...]  (REPLICAS=\"Kind/name=count ...\")"
need_function
dir=$(overlay_dir "$1")
shift
[[ $# -gt 0 || -n ${REPLICAS:-} ]] || die "nothing to pin: give IMAGE=repository:tag[@digest] and/or REPLICAS=\"Kind/name=count\""

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
header='apiVersion: fn.cache.example.com/v1alpha1
kind: SetImageReplicas
metadata:
  name: requested-pins
failOnEmptyMatch: true'

if [[ $# -gt 0 ]]; then
  {
    echo "$header"
    echo "images:"
    for ref in "$@"; do
      split_ref "$ref"
      echo "- name: $ref_name"
      [[ -z $ref_tag ]] || echo "  newTag: \"$ref_tag\""
      [[ -z $ref_digest ]] || echo "  digest: $ref_digest"
    done
  } > "$tmp/images.yaml"
  if [[ -n ${RESOLVE:-} ]]; then
    [[ -x $root/bin/image ]] || die "bin/image is missing: run 'make build' first"
    "$root/bin/image" resolve-pins --file "$tmp/images.yaml" || die "could not resolve the digests (see above); nothing was changed"
  fi
  apply_pins "$tmp/images.yaml" "$dir/images.yaml"
fi

if [[ -n ${REPLICAS:-} ]]; then
  {
    echo "$header"
    echo "replicas:"
    for pin in $REPLICAS; do
      [[ $pin =~ ^([A-Za-z]+)/([a-z0-9.-]+)=([0-9]+)$ ]] || die "REPLICAS entry '$pin': want Kind/name=count"
      printf -- '- kind: %s\n  name: %s\n  count: %s\n' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" "${BASH_REMATCH[3]}"
    done
  } > "$tmp/replicas.yaml"
  apply_pins "$tmp/replicas.yaml" "$dir/replicas.yaml"
fi

render_pins "$dir"
