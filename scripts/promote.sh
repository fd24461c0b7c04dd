#!/usr/bin/env bash
# The GitOps promotion step: copies the image pins of one environment into
# the next (never the replica counts, which are per environment) with
# set-image-replicas, and renders them into the target's kustomization.yaml.
# Commit the result and let Argo CD or Flux roll it out.
#
# An environment that pins an image by digest keeps doing so: when the
# source has no digest for it, pass the digest of the promoted tag:
#   DIGEST=sha256:<64 hex> scripts/promote.sh staging prod
# It then applies to that image (IMAGE= to choose another; default: the operator).
#
# Usage: scripts/promote.sh FROM TO
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[[ $# -eq 2 ]] || die "usage: $0 FROM TO   (e.g. $0 dev staging)"
need_function
from=$(overlay_dir "$1")
to=$(overlay_dir "$2")
image=${IMAGE:-registry.example.com/memcached-operator}

backup=$(mktemp)
trap 'rm -f "$backup" "$backup.cfg"' EXIT
cp "$to/images.yaml" "$backup"
apply_pins "$from/images.yaml" "$to/images.yaml"

# pinned_field FILE FIELD: the field of $image's entry in a pins file.
pinned_field() {
  awk -v img="- name: $image" -v f="$2:" '
    $0 == img { inside = 1; next }
    inside && /^- / { exit }
    inside && $1 == f { print $2; exit }' "$1"
}
if [[ -n $(pinned_field "$backup" digest) && -z $(pinned_field "$to/images.yaml" digest) ]]; then
  if [[ -z ${DIGEST:-} ]]; then
    cp "$backup" "$to/images.yaml"
    die "$2 pins $image by digest and $1 has none: run again with DIGEST=sha256:... of $image:$(pinned_field "$from/images.yaml" newTag)"
  fi
  cat > "$backup.cfg" <<CFG
apiVersion: fn.cache.example.com/v1alpha1
kind: SetImageReplicas
metadata:
  name: promoted-digest
failOnEmptyMatch: true
images:
- name: $image
  newTag: "$(pinned_field "$to/images.yaml" newTag)"
  digest: $DIGEST
CFG
  apply_pins "$backup.cfg" "$to/images.yaml"
fi

render_pins "$to"
echo "promoted the image pins of $1 to $2; review with 'git diff overlays/$2' and commit"
