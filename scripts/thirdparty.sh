#!/usr/bin/env bash
# scripts/thirdparty.sh DIR sync|check|tree OUT: a copy of a Go module in
# DIR (third_party/paho, third_party/mochi) is the release that
# DIR/UPSTREAM names plus the patches in DIR/patches/, applied in order
# (DIR/CAIRN.md says why), with its import paths made cairn's, as
# scripts/badger.sh does for Badger: the copy is a part of cairn's module,
# not a module of its own (a module with a replace directive could not be
# installed with go install …@version).
#
#   sync   rebuilds the copy from the release (fetched through the Go
#          module proxy into the module cache) and the patches
#   check  rebuilds it in a temporary directory and fails, naming the
#          files, on any difference from the copy
#   tree OUT
#          writes the copy as it is before the rewrite into OUT: the tree
#          that patches are written against
#
# UPSTREAM's fields: module, version, dirs (whose non-test Go files are
# kept), files (other files kept), exclude (Go files of those dirs left
# out, by their path in the release).
set -euo pipefail
here=$PWD
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: scripts/thirdparty.sh DIR sync|check|tree OUT" >&2; exit 2; }
copy=${1%/}
copy=${copy#./}
shift
case $copy in
third_party/*) ;;
*) echo "thirdparty.sh: $copy: want a directory under third_party/, from the repository's top" >&2; exit 2 ;;
esac
upstream=$copy/UPSTREAM
[ -f "$upstream" ] || { echo "thirdparty.sh: $upstream: no such file" >&2; exit 2; }
name=$(basename "$copy")

field() { awk -v k="$1" '$1 == k { $1 = ""; sub(/^ /, ""); print }' "$upstream" | paste -sd ' ' -; }
module=$(field module)
version=$(field version)
# The copy's import path in cairn's module.
path=$(awk '$1 == "module" { print $2 }' go.mod)/$copy

# release prints the directory of the release in the module cache.
release() {
	local dir
	dir=$(go mod download -json "$module@$version" | awk -F'"' '$2 == "Dir" { print $4 }')
	[ -n "$dir" ] || { echo "thirdparty.sh: go mod download $module@$version failed" >&2; exit 1; }
	echo "$dir"
}

# tree DIR makes DIR the release's kept files (UPSTREAM's dirs: their Go
# files but tests; its files) plus the patches, and cairn's own files of
# the copy (CAIRN.md, UPSTREAM, patches/).
tree() {
	local out=$1 rel d f p rp exclude
	rel=$(release)
	[ -d "$rel" ] || { echo "thirdparty.sh: $module@$version not in the module cache" >&2; exit 1; }
	exclude=" $(field exclude) "
	for d in $(field dirs); do
		mkdir -p "$out/$d"
		for f in "$rel/$d"/*.go; do
			[ -e "$f" ] || { echo "thirdparty.sh: $d in $upstream has no Go files in the release" >&2; exit 1; }
			case $f in *_test.go) continue ;; esac
			rp=${f#"$rel"/}
			rp=${rp#./}
			case $exclude in *" $rp "*) continue ;; esac
			install -m 0644 "$f" "$out/$d/"
		done
	done
	for f in $(field files); do
		install -D -m 0644 "$rel/$f" "$out/$f"
	done
	for p in "$copy"/patches/*.patch; do
		[ -e "$p" ] || continue # no patches
		if ! patch -s -p1 -d "$out" --no-backup-if-mismatch < "$p"; then
			echo "thirdparty.sh: $p does not apply to $module@$version" >&2
			exit 1
		fi
	done
	cp "$copy/CAIRN.md" "$copy/UPSTREAM" "$out/"
	if [ -d "$copy/patches" ]; then
		cp -r "$copy/patches" "$out/"
	fi
}

# build DIR makes DIR the copy: tree, then rewrite.
build() {
	tree "$1"
	rewrite "$1"
}

# rewrite DIR makes the tree in DIR a part of cairn's module: every import
# of the release's module, or of a package under it, becomes one of the
# copy's path. The patches are written against the release's paths.
rewrite() {
	local out=$1 quoted files left
	quoted="\"${module//./\\.}(/[^\"]*)?\""
	files=$(grep -rlE --include='*.go' "$quoted" "$out" || true)
	if [ -n "$files" ]; then
		# shellcheck disable=SC2086 # the copy's file names have no spaces
		sed -i -E "s#^(import[[:space:]]+|[[:space:]]+)(([A-Za-z_][A-Za-z0-9_]*|\.)[[:space:]]+)?$quoted#\1\2\"$path\4\"#" $files
		# shellcheck disable=SC2086
		gofmt -w $files
	fi
	left=$(grep -rnE --include='*.go' "$quoted" "$out" || true)
	if [ -n "$left" ]; then
		echo "thirdparty.sh: rewrite leaves $module quoted where it does not rewrite it:" >&2
		echo "$left" >&2
		exit 1
	fi
}

case "${1:-}" in
sync)
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	build "$tmp/$name"
	rm -rf "$copy"
	mv "$tmp/$name" "$copy"
	echo "thirdparty.sh: $copy is $module@$version plus $(find "$copy" -path "$copy/patches/*.patch" | wc -l) patches"
	;;
check)
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	build "$tmp/$name"
	if ! diff -r -q "$tmp/$name" "$copy" >&2; then
		diff -r "$tmp/$name" "$copy" >&2 || true
		echo "thirdparty.sh: $copy differs from $module@$version plus its patches (above: the files, then < the rebuilt tree, > the copy); change a patch, then run scripts/thirdparty.sh $copy sync" >&2
		exit 1
	fi
	echo "thirdparty.sh: $copy is $module@$version plus its patches"
	;;
tree)
	[ $# -eq 2 ] || { echo "usage: scripts/thirdparty.sh $copy tree OUT" >&2; exit 2; }
	out=$2
	case $out in /*) ;; *) out=$here/$out ;; esac
	[ ! -e "$out" ] || { echo "thirdparty.sh: $out exists" >&2; exit 1; }
	tree "$out"
	echo "thirdparty.sh: $out is $module@$version plus its patches, with the release's import paths"
	;;
*)
	echo "usage: scripts/thirdparty.sh DIR sync|check|tree OUT" >&2
	exit 2
	;;
esac
