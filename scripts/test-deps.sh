#!/usr/bin/env bash
# Installs the programs the tests run for real that are not Go modules, so a
# fresh Debian or Ubuntu machine (CI runs as root there) needs nothing done
# by hand: memcached, from Debian's memcached package, for the tests in
# test/memcached that run the operator's pod templates against the real
# server. Elsewhere it fails with the package to install; it never skips.
#
# Usage: scripts/test-deps.sh
set -euo pipefail
exec 1>&2

# command=package
deps=(memcached=memcached)

missing=()
for dep in "${deps[@]}"; do
  command -v "${dep%%=*}" >/dev/null 2>&1 || missing+=("${dep#*=}")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "test-deps: present ($(memcached -V))"
  exit 0
fi

if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  echo "test-deps: the tests need ${missing[*]} on PATH: install the Debian/Ubuntu package(s) '${missing[*]}' (sudo apt-get install ${missing[*]}) or your system's equivalent, then run 'make test' again" >&2
  exit 1
fi

start=$SECONDS
echo "test-deps: installing Debian package(s) ${missing[*]} with apt-get ..."
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >/tmp/test-deps-apt.log 2>&1; then
  tail -n 20 /tmp/test-deps-apt.log >&2
  echo "test-deps: FAILED to install ${missing[*]} with apt-get (log: /tmp/test-deps-apt.log); install it by hand and run 'make test' again" >&2
  exit 1
fi
echo "test-deps: installed ${missing[*]} in $((SECONDS - start))s ($(memcached -V))"
