# Shared helpers of the scripts: paths, errors, overlays and their pins.
# shellcheck shell=bash

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fn="$root/bin/set-image-replicas"

die() { echo "$(basename "$0"): $*" >&2; exit 1; }

need_function() {
  [[ -x $fn ]] || die "bin/set-image-replicas is missing: run 'make build' first"
  [[ -x $root/bin/kpt ]] || die "bin/kpt is missing: run 'make tools' first"
}

overlay_dir() {
  local env=$1 dir="$root/overlays/$1"
  [[ -f $dir/kustomization.yaml ]] || die "no overlay '$env' (want one of: $(cd "$root/overlays" && echo */ | tr -d /))"
  echo "$dir"
}

# split_ref REF: sets ref_name, ref_tag and ref_digest from
# repository[:tag][@digest] (a port in the registry host is not a tag).
split_ref() {
  ref_name=$1 ref_tag="" ref_digest=""
  if [[ $ref_name == *@* ]]; then ref_digest=${ref_name#*@}; ref_name=${ref_name%%@*}; fi
  local last=${ref_name##*/}
  if [[ $last == *:* ]]; then ref_tag=${last#*:}; ref_name=${ref_name%:*}; fi
  [[ -n $ref_tag || -n $ref_digest ]] || die "$1: give a tag, a digest or both (repository:tag@sha256:...)"
}

# apply_pins CONFIG FILE: runs the function with CONFIG on FILE and writes
# the result back, only if the function succeeded (it prints its own errors).
apply_pins() {
  local config=$1 file=$2 out
  out=$(mktemp)
  if ! "$fn" --quiet "$config" "$file" > "$out"; then
    rm -f "$out"
    die "set-image-replicas rejected $config for ${file#"$root"/} (see above); nothing was changed"
  fi
  if cmp -s "$out" "$file"; then
    rm -f "$out"
    return
  fi
  mv "$out" "$file"
  echo "pinned ${file#"$root"/}"
}

# render_pins DIR: `kpt fn render DIR` with bin/ first on PATH, so the
# Kptfile's `exec: set-image-replicas` is bin/set-image-replicas: each
# mutator's configPath, in order, written into the overlay's kustomizations.
#
# bin/kpt is the newest kpt release the Go module proxy serves (v1.0.0-beta.61).
# The Kptfiles are committed as kpt v1.0.0-beta.65 and later write them after
# a render, with a status block (Rendered, renderStatus) that releases before
# beta.65 refuse to read. So the render runs on a copy of the package whose
# Kptfile has no status, and what it rewrote is copied back; the committed
# Kptfile stays as current kpt leaves it. kpt's report is shown only when the
# render fails.
render_pins() {
  local dir=$1 out scratch f
  scratch=$(mktemp -d)
  cp -R "$dir/." "$scratch/"
  sed -i '/^status:/,$d' "$scratch/Kptfile"
  if ! out=$(PATH="$root/bin:$PATH" "$root/bin/kpt" fn render "$scratch" --allow-exec 2>&1); then
    rm -rf "$scratch"
    echo "$out" >&2
    die "kpt fn render ${dir#"$root"/} failed (see above); nothing was written"
  fi
  while IFS= read -r -d '' f; do
    f=${f#"$scratch"/}
    [[ $f == Kptfile ]] && continue
    if ! cmp -s "$scratch/$f" "$dir/$f"; then
      cp "$scratch/$f" "$dir/$f"
      echo "pinned ${dir#"$root"/}/$f"
    fi
  done < <(find "$scratch" -type f -print0)
  rm -rf "$scratch"
}
