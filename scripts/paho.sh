#!/usr/bin/env bash
# scripts/paho.sh sync|check: cairn's copy of the Eclipse Paho MQTT client,
# in third_party/paho, is the release that UPSTREAM names plus the patches
# in patches/, applied in order (third_party/paho/CAIRN.md says why). It
# keeps the release's import path and go.mod: cairn's go.mod replaces the
# module with it.
#
#   sync   rebuilds the copy from the release (fetched through the Go
#          module proxy into the module cache) and the patches
#   check  rebuilds it in a temporary directory and fails, naming the
#          files, on any difference from the copy
set -euo pipefail
cd "$(dirname "$0")/.."
copy=third_party/paho
upstream=$copy/UPSTREAM

field() { awk -v k="$1" '$1 == k { $1 = ""; sub(/^ /, ""); print }' "$upstream"; }
module=$(field module)
version=$(field version)

# release prints the directory of the release in the module cache.
release() {
	go mod download -json "$module@$version" | awk -F'"' '$2 == "Dir" { print $4 }'
}

# build DIR makes DIR the release's kept files (UPSTREAM's dirs: their Go
# files but tests; its files) plus the patches, and cairn's own files of
# the copy (CAIRN.md, UPSTREAM, patches/).
build() {
	local out=$1 rel d f p
	rel=$(release)
	[ -d "$rel" ] || { echo "paho.sh: $module@$version not in the module cache" >&2; exit 1; }
	for d in $(field dirs); do
		mkdir -p "$out/$d"
		for f in "$rel/$d"/*.go; do
			case $f in *_test.go) continue ;; esac
			install -m 0644 "$f" "$out/$d/"
		done
	done
	for f in $(field files); do
		install -D -m 0644 "$rel/$f" "$out/$f"
	done
	for p in "$copy"/patches/*.patch; do
		if ! patch -s -p1 -d "$out" --no-backup-if-mismatch < "$p"; then
			echo "paho.sh: $p does not apply to $module@$version" >&2
			exit 1
		fi
	done
	cp -r "$copy/CAIRN.md" "$copy/UPSTREAM" "$copy/patches" "$out/"
}

case "${1:-}" in
sync)
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	build "$tmp/paho"
	rm -rf "$copy"
	mv "$tmp/paho" "$copy"
	echo "paho.sh: $copy is $module@$version plus $(ls "$copy"/patches/*.patch | wc -l) patches"
	;;
check)
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	build "$tmp/paho"
	if ! diff -r -q "$tmp/paho" "$copy" >&2; then
		diff -r "$tmp/paho" "$copy" >&2 || true
		echo "paho.sh: $copy differs from $module@$version plus its patches (above: the files, then < the rebuilt tree, > the copy); change a patch, then run scripts/paho.sh sync" >&2
		exit 1
	fi
	echo "paho.sh: $copy is $module@$version plus its patches"
	;;
*)
	echo "usage: scripts/paho.sh sync|check" >&2
	exit 2
	;;
esac
