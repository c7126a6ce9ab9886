#!/usr/bin/env bash
# scripts/binsize.sh: builds the stripped release binaries (linux/amd64
# and linux/arm64, with the flags and build tags of build-release.sh) in
# a temporary directory and fails if either is larger than
# BINSIZE_MAX_MIB (default 14) MiB. Prints each size. docs/performance.md
# says what the binary is made of, and what each large dependency costs.
set -euo pipefail
cd "$(dirname "$0")/.."
max_mib=${BINSIZE_MAX_MIB:-14}
[[ $max_mib =~ ^[1-9][0-9]*$ ]] || { echo "binsize.sh: BINSIZE_MAX_MIB must be a whole number of MiB (got '$max_mib')" >&2; exit 1; }
tags=$(tr -d ' \n' <scripts/release-tags)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=
for arch in amd64 arm64; do
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=false -tags "$tags" \
		-ldflags "-s -w" -o "$tmp/cairn-$arch" ./cmd/cairn
	size=$(stat -c %s "$tmp/cairn-$arch")
	printf 'binsize.sh: linux/%s %d bytes (%.2f MiB; at most %d MiB)\n' "$arch" "$size" "$(awk -v s="$size" 'BEGIN { print s / 1048576 }')" "$max_mib"
	if [ "$size" -gt $((max_mib << 20)) ]; then
		echo "binsize.sh: the stripped linux/$arch binary is larger than $max_mib MiB: see docs/performance.md for what it is made of" >&2
		fail=1
	fi
done
[ -z "$fail" ]
