# Shared helpers of the scripts: paths and errors. The overlays' pins are
# kept by bin/pins (hack/pins), not here.
# shellcheck shell=bash

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

die() { echo "$(basename "$0"): $*" >&2; exit 1; }
