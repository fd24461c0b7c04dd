#!/usr/bin/env bash
# make test's suites, once the toolchain, the build and lint are done: e2e,
# the operator's suites under the race detector, every other package, and
# the real-memcached tier (verbose, so its figures show).
#
# e2e is the long pole, and it spends most of its time waiting on its
# clusters while the cores sit idle. So it starts first, in the background,
# and the rest runs in front of it; its output follows theirs (go test prints
# a package's output only when the package ends anyway). Every suite runs to
# its end, so one failure does not hide another, and the last lines name the
# suites that failed. docs/development.md#cold-start has the measured times
# and what this saves.
#
# Environment (set by the Makefile): E2E_PACKAGES, RACE_PACKAGES,
# OTHER_PACKAGES, MEMCACHED_TIER.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
: "${E2E_PACKAGES:?}" "${RACE_PACKAGES:?}" "${OTHER_PACKAGES:?}" "${MEMCACHED_TIER:?}"

start=$SECONDS
elapsed() { local s=$((SECONDS - start)); printf '%dm%02ds' $((s / 60)) $((s % 60)); }
failed=()

e2e_log=$(mktemp -t test-e2e.XXXXXX)
trap 'rm -f "$e2e_log"' EXIT
echo "test: $E2E_PACKAGES started in the background; its output follows the other suites'"
# shellcheck disable=SC2086 # package lists
go test -count=1 -timeout 30m $E2E_PACKAGES > "$e2e_log" 2>&1 &
e2e=$!

suite() {
  local name=$1
  shift
  echo "test: $name ($(elapsed) into the suites)"
  "$@" || failed+=("$name")
}
# shellcheck disable=SC2086 # package lists
suite "the operator's suites under the race detector" env CGO_ENABLED=1 go test -race -count=1 -timeout 20m $RACE_PACKAGES
# shellcheck disable=SC2086
suite "the other packages" go test -count=1 -timeout 30m $OTHER_PACKAGES
# grep drops go test -v's RUN/PAUSE/CONT lines; pipefail keeps go test's
# exit status.
suite "the real-memcached tier" bash -o pipefail -c "go test -count=1 -timeout 15m -v $MEMCACHED_TIER 2>&1 | { grep -vE '^=== (RUN|PAUSE|CONT)' || true; }"

while kill -0 "$e2e" 2>/dev/null; do
  echo "test: waiting for $E2E_PACKAGES, $(elapsed) into the suites"
  # A sleep that the end of e2e cuts short.
  for _ in {1..60}; do kill -0 "$e2e" 2>/dev/null || break; sleep 1; done
done
e2e_status=0
wait "$e2e" || e2e_status=$?
echo "test: $E2E_PACKAGES ended ($(elapsed) into the suites):"
cat "$e2e_log"
((e2e_status == 0)) || failed+=("$E2E_PACKAGES")

if ((${#failed[@]})); then
  die "FAILED after $(elapsed): $(IFS=,; echo "${failed[*]}")"
fi
echo "test: every suite passed in $(elapsed)"
