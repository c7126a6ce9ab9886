#!/usr/bin/env bash
# Runs the power-cut proof of promise 1 (an acknowledged reading is on disk)
# with CYCLES power cuts under load, plus the control run without sync and
# the ingest-rate measurement, and prints the figures: one line per cycle and
# the totals. Long runs are what it is for; the test suite runs 20 cycles.
# Needs root, /dev/fuse and fusermount3 (apt-get install fuse3).
#
#   scripts/powercut.sh [CYCLES]      # default 20
#
# The tests run without the race detector here, so the rates printed are
# cairn's, not the publisher's. docs/reliability.md explains the figures.
set -euo pipefail
cd "$(dirname "$0")/.."

cycles=${1:-20}
case $cycles in
'' | *[!0-9]* | 0*)
	echo "usage: $0 [CYCLES]   (CYCLES: a positive number, default 20)" >&2
	exit 2
	;;
esac

log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "powercut.sh: $cycles power cuts, then the control run and the ingest rates"
started=$(date +%s)
set +e
CAIRN_POWERCUT_CYCLES=$cycles go test -count=1 -v -timeout 0 -run 'TestPowerCut' ./scripts/powercut/ 2>&1 |
	tee "$log" |
	grep --line-buffered -E '^ +powercut_test\.go:[0-9]+: (cycle|control|total|ingest)|^(--- |ok |FAIL|PASS)' |
	sed -u -E 's/^ +powercut_test\.go:[0-9]+: //'
status=${PIPESTATUS[0]}
set -e
echo "powercut.sh: took $(($(date +%s) - started))s"
if [ "$status" -ne 0 ]; then
	echo "powercut.sh: FAILED (go test exit status $status); full output:" >&2
	cat "$log" >&2
fi
exit "$status"
