#!/usr/bin/env bash
# The GitOps promotion step: copies the image pins of one environment into
# the next (never the replica counts, which are per environment) with
# set-image-replicas, and renders them into the target's kustomizations.
# Commit the result and let Argo CD or Flux roll it out.
#
# An environment that pins an image by digest keeps doing so: the function
# refuses a tag-only pin over a digest. Pass the digest of the promoted tag:
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

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# pinned_field FILE FIELD: the field of $image's entry in a pins file.
pinned_field() {
  awk -v img="- name: $image" -v f="$2:" '
    $0 == img { inside = 1; next }
    inside && /^- / { exit }
    inside && $1 == f { print $2; exit }' "$1"
}

config=$from/images.yaml
if [[ -n ${DIGEST:-} ]]; then
  # The source's pins with the promoted tag's digest added to $image.
  config=$tmp/promoted.yaml
  cp "$from/images.yaml" "$config"
  cat > "$tmp/digest.yaml" <<CFG
apiVersion: fn.cache.example.com/v1alpha1
kind: SetImageReplicas
metadata:
  name: promoted-digest
failOnEmptyMatch: true
images:
- name: $image
  newTag: "$(pinned_field "$from/images.yaml" newTag)"
  digest: $DIGEST
CFG
  "$fn" --quiet "$tmp/digest.yaml" "$config" > "$tmp/out.yaml" || die "DIGEST=$DIGEST: set-image-replicas refused it (see above); nothing was changed"
  mv "$tmp/out.yaml" "$config"
fi

if ! "$fn" --quiet "$config" "$to/images.yaml" > "$tmp/images.yaml" 2> "$tmp/err"; then
  cat "$tmp/err" >&2
  if grep -q "pinned by digest" "$tmp/err"; then
    die "$2 pins $image by digest and $1 pins only a tag: run again with DIGEST=sha256:... of $image:$(pinned_field "$from/images.yaml" newTag)"
  fi
  die "set-image-replicas refused the promotion (see above); nothing was changed"
fi
if ! cmp -s "$tmp/images.yaml" "$to/images.yaml"; then
  cp "$tmp/images.yaml" "$to/images.yaml"
  echo "pinned ${to#"$root"/}/images.yaml"
fi

render_pins "$to"
echo "promoted the image pins of $1 to $2; review with 'git diff overlays/$2' and commit"
