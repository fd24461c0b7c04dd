# Shared helpers of the overlay scripts (pin.sh, render-pins.sh, promote.sh).
# shellcheck shell=bash

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fn="$root/bin/set-image-replicas"

die() { echo "$(basename "$0"): $*" >&2; exit 1; }

need_function() {
  [[ -x $fn ]] || die "bin/set-image-replicas is missing: run 'make build' first"
}

overlay_dir() {
  local env=$1 dir="$root/overlays/$1"
  [[ -f $dir/kustomization.yaml ]] || die "no overlay '$env' (want one of: $(cd "$root/overlays" && echo */ | tr -d /))"
  echo "$dir"
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

# render_pins DIR: what `kpt fn render DIR` does with the overlay's Kptfile
# pipeline: each mutator's configPath, in order, applied to kustomization.yaml.
render_pins() {
  local dir=$1 config
  while read -r config; do
    apply_pins "$dir/$config" "$dir/kustomization.yaml"
  done < <(sed -n 's/^ *configPath: *//p' "$dir/Kptfile")
}
