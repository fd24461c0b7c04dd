#!/usr/bin/env bash
# A local OCI registry for `make docker-push` and `make release`: the CNCF
# distribution registry from bin/ (make tools), on 127.0.0.1, configured by
# scripts/registry.yml, storing under .work/registry. `down` stops it and
# deletes what it stored.
#
# Usage: scripts/registry.sh up|down      (REGISTRY_PORT=5000)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
port=${REGISTRY_PORT:-5000}
dir=$root/.work/registry
pidfile=$dir/registry.pid

say() { echo "registry: $*" >&2; }
die() { echo "registry: $*" >&2; exit 1; }
running() { [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }
# answers: GET /v2/ is 200 (bash's /dev/tcp: no curl needed).
answers() {
  (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'GET /v2/ HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 && head -n 1 <&3 | grep -q ' 200') 2>/dev/null
}

up() {
  [[ -x $root/bin/registry ]] || die "bin/registry is missing: run 'make tools'"
  if running; then
    say "already running at 127.0.0.1:$port (pid $(cat "$pidfile"))"
    return
  fi
  mkdir -p "$dir/storage"
  local t0=$SECONDS
  OTEL_TRACES_EXPORTER=none REGISTRY_HTTP_ADDR=127.0.0.1:$port REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY=$dir/storage \
    setsid "$root/bin/registry" serve "$root/scripts/registry.yml" >"$dir/registry.log" 2>&1 &
  echo $! >"$pidfile"
  for _ in $(seq 100); do
    if answers; then
      say "serving at 127.0.0.1:$port in $((SECONDS - t0))s (push to 127.0.0.1:$port/NAME:TAG; storage $dir/storage)"
      return
    fi
    running || { tail -n 20 "$dir/registry.log" >&2; die "exited; its log is above"; }
    sleep 0.1
  done
  die "not answering at 127.0.0.1:$port after 10s (log: $dir/registry.log)"
}

down() {
  if running; then
    kill "$(cat "$pidfile")" && say "stopped"
  else
    say "not running"
  fi
  rm -rf "$dir"
}

case ${1:-} in
  up) up ;;
  down) down ;;
  *) die "usage: $0 up|down" ;;
esac
