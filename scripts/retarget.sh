#!/usr/bin/env bash
# Points every image of every overlay at REGISTRY, for a fork that ships to
# its own registry or a mirror of the upstream images: the operator becomes
# REGISTRY/memcached-operator, memcached REGISTRY/memcached and the exporter
# REGISTRY/memcached-exporter. The overlays' pins keep the names the base
# manifests use and gain a newName (set-image-replicas), so later pins,
# releases and promotions name the new repositories.
#
# Usage: REGISTRY=ghcr.io/you scripts/retarget.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_function
registry=${REGISTRY:?REGISTRY is required, such as ghcr.io/you or localhost:5000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/retarget.yaml" <<CFG
apiVersion: fn.cache.example.com/v1alpha1
kind: SetImageReplicas
metadata:
  name: retarget
images:
- name: registry.example.com/memcached-operator
  newName: $registry/memcached-operator
- name: memcached
  newName: $registry/memcached
- name: quay.io/prometheus/memcached-exporter
  newName: $registry/memcached-exporter
CFG
for dir in "$root"/overlays/*/; do
  dir=${dir%/}
  apply_pins "$tmp/retarget.yaml" "$dir/images.yaml"
  render_pins "$dir"
done
echo "retargeted every overlay to $registry; review with 'git diff overlays' and commit"
