# Shared helpers of the scripts: paths and errors. The overlays' pins are
# kept by bin/pins (hack/pins), not here.
# shellcheck shell=bash

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

die() { echo "$(basename "$0"): $*" >&2; exit 1; }

# check_signing_key fails before anything is pushed when COSIGN_KEY names
# no key: a release is signed or not pushed.
check_signing_key() {
  local key=${COSIGN_KEY:-}
  [[ -n $key ]] || die "COSIGN_KEY is empty: set it to the release key (a file or env://VAR), or run 'make keygen' for a dev key"
  [[ $key == env://* || -f $key ]] || die "COSIGN_KEY=$key does not exist: run 'make keygen' for a dev key pair, or point COSIGN_KEY at the release key (docs/signing.md)"
}
