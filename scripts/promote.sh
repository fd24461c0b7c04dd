#!/usr/bin/env bash
# The GitOps promotion step: copies the image pins of one environment into
# the next (never the replica counts, which are per environment) with
# set-image-replicas, and renders them into the target's kustomizations.
# Commit the result and let Argo CD or Flux roll it out.
#
# An environment whose images.yaml says cache.example.com/pin-by-digest:
# "true" (prod) gets every image by tag and digest, its own pins too: the
# digest each tag has in its registry, resolved here (bin/image
# resolve-pins), and a digest already pinned must be the one the registry
# serves. A digest is
# never typed by hand.
#
# Usage: scripts/promote.sh FROM TO
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[[ $# -eq 2 ]] || die "usage: $0 FROM TO   (e.g. $0 dev staging)"
[[ -z ${DIGEST:-} ]] || die "DIGEST is not taken: promotion resolves each tag's digest from its registry"
need_function
from=$(overlay_dir "$1")
to=$(overlay_dir "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ! "$fn" --quiet "$from/images.yaml" "$to/images.yaml" > "$tmp/images.yaml" 2> "$tmp/err"; then
  cat "$tmp/err" >&2
  die "set-image-replicas refused the promotion (see above); nothing was changed"
fi
# Every pin of the target, the promoted ones and its own (prod's exporter),
# gets the digest the registry serves for its tag.
if grep -q 'cache.example.com/pin-by-digest: "true"' "$to/images.yaml"; then
  [[ -x $root/bin/image ]] || die "bin/image is missing: run 'make build' first"
  echo "promote: $2 pins by digest; resolving each tag's digest from its registry ..."
  "$root/bin/image" resolve-pins --file "$tmp/images.yaml" || die "the registry does not confirm the pins of $2 (see above); nothing was changed"
fi
if ! cmp -s "$tmp/images.yaml" "$to/images.yaml"; then
  cp "$tmp/images.yaml" "$to/images.yaml"
  echo "pinned ${to#"$root"/}/images.yaml"
fi

render_pins "$to"
echo "promoted the image pins of $1 to $2; review with 'git diff overlays/$2' and commit"
