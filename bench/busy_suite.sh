#!/usr/bin/env bash
# The suite on a busy machine (issue #36 item 4): a clean clone of this repository, `make test` three times in a row
# while stress-ng keeps every core busy, then `.ci/run` on another clean clone with the machine idle; prints each
# run's result and seconds. Needs stress-ng (apt-get install stress-ng). Usage: bench/busy_suite.sh [WORKDIR]
set -u
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d)}"
rm -rf "$work/busy" "$work/idle"
git clone -q "$repo" "$work/busy"
echo "clone $(git -C "$work/busy" log --oneline -1)"
export REQUIRE_BROWSER=1 REQUIRE_REDIS=1 REQUIRE_SLURM=1 REQUIRE_DEMO=1
for i in 1 2 3; do
  stress-ng --cpu "$(nproc)" --timeout 0 >/dev/null 2>&1 &
  stress=$!
  began=$(date +%s)
  (cd "$work/busy" && make test) >"$work/busy-$i.log" 2>&1
  rc=$?
  kill "$stress"; wait "$stress" 2>/dev/null
  echo "busy run $i: exit $rc in $(($(date +%s) - began)) s; $(tail -1 "$work/busy-$i.log")"
done
git clone -q "$repo" "$work/idle"
began=$(date +%s)
(cd "$work/idle" && .ci/run) >"$work/idle.log" 2>&1
rc=$?
echo "idle .ci/run: exit $rc in $(($(date +%s) - began)) s; $(tail -1 "$work/idle.log")"
