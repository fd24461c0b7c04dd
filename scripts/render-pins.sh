#!/usr/bin/env bash
# Writes an overlay's pins (images.yaml, replicas.yaml) into its
# kustomizations: `kpt fn render` of the overlay, with bin/ on PATH. A no-op
# when they are already in sync.
#
# Usage: scripts/render-pins.sh ENV
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[[ $# -eq 1 ]] || die "usage: $0 ENV"
need_function
render_pins "$(overlay_dir "$1")"
