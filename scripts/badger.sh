#!/usr/bin/env bash
# scripts/badger.sh sync|check|test: cairn's copy of Badger, in
# third_party/badger, is the release that UPSTREAM names plus the patches
# in patches/, applied in order (third_party/badger/CAIRN.md says why),
# with its import paths made cairn's: the copy is a part of cairn's module,
# not a module of its own.
#
#   sync   rebuilds the copy from the release (fetched through the Go
#          module proxy into the module cache) and the patches, then
#          rewrites it into cairn's module (rewrite, below)
#   check  rebuilds it in a temporary directory and fails on any
#          difference from the copy
#   test   runs the release's own tests of the packages UPSTREAM lists,
#          with cairn's regression tests (_tests/), and go vet, on the
#          copy as it is before the rewrite: the release's import paths
#          and its go.mod (it first proves that this tree, rewritten, is
#          the copy); then each regression test against that tree built
#          without the patch it names on its first line, where it must
#          fail
#   tree DIR
#          writes the copy as it is before the rewrite into DIR: the tree
#          that patches are written against and tried on
set -euo pipefail
here=$PWD
cd "$(dirname "$0")/.."
copy=third_party/badger
upstream=$copy/UPSTREAM

field() { awk -v k="$1" '$1 == k { $1 = ""; sub(/^ /, ""); print }' "$upstream"; }
module=$(field module)
version=$(field version)
# The copy's import path in cairn's module.
path=$(awk '$1 == "module" { print $2 }' go.mod)/$copy

# release prints the directory of the release in the module cache.
release() {
	go mod download -json "$module@$version" | awk -F'"' '$2 == "Dir" { print $4 }'
}

# build DIR makes DIR the release's kept files plus the patches, and
# cairn's own files of the copy (CAIRN.md, UPSTREAM, patches/, _tests/):
# the copy before the rewrite, a module of its own with the release's
# import paths and go.mod, as the patches are written.
build() {
	local out=$1 rel p
	rel=$(release)
	[ -d "$rel" ] || { echo "badger.sh: $module@$version not in the module cache" >&2; exit 1; }
	build_release "$out" "$rel"
	for p in "$copy"/patches/*.patch; do
		if ! patch -s -p1 -d "$out" --no-backup-if-mismatch < "$p"; then
			echo "badger.sh: $p does not apply to $module@$version" >&2
			exit 1
		fi
	done
	cp -r "$copy/CAIRN.md" "$copy/UPSTREAM" "$copy/patches" "$out/"
	if [ -d "$copy/_tests" ]; then
		cp -r "$copy/_tests" "$out/"
	fi
}

# rewrite DIR, the last step of sync and check, mechanical: it makes the
# tree that build made in DIR a part of cairn's module. In every Go file
# but _tests/'s, an import of the release's module or one of its packages
# ("$module", "$module/y") becomes one of the copy ("$path",
# "$path/y"); gofmt then sorts those files' imports again. Only import
# lines change, and rewrite fails if the release's path is left quoted
# anywhere else in a Go file (a string, an import comment: none is in
# v4.9.6), for a person to judge. The release's go.mod goes, or the copy
# would be a module of its own again. The regression tests in _tests/
# keep the release's paths: test runs them on the tree before the
# rewrite.
rewrite() {
	local out=$1 quoted files left
	quoted="\"${module//./\\.}(/[^\"]*)?\""
	files=$(grep -rlE --include='*.go' --exclude-dir=_tests "$quoted" "$out" || true)
	if [ -n "$files" ]; then
		# shellcheck disable=SC2086 # the copy's file names have no spaces
		sed -i -E "s#^(import[[:space:]]+|[[:space:]]+)(([A-Za-z_][A-Za-z0-9_]*|\.)[[:space:]]+)?$quoted#\1\2\"$path\4\"#" $files
		# shellcheck disable=SC2086
		gofmt -w $files
	fi
	left=$(grep -rnE --include='*.go' --exclude-dir=_tests "$quoted" "$out" || true)
	if [ -n "$left" ]; then
		echo "badger.sh: rewrite leaves $module quoted where it does not rewrite it:" >&2
		echo "$left" >&2
		exit 1
	fi
	rm "$out/go.mod"
}

# build_release OUT REL copies the files of the release in REL that the
# copy keeps into OUT.
build_release() {
	local out=$1 rel=$2 d f
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
}

# fails_without FILE [FLAG...]: FILE, one of cairn's regression tests in
# _tests/, fails on the copy built without the patch its first line names
# ("// cairn's regression test of patches/NAME.patch: ..."), with the
# release's tests of its package beside it (their helpers): the test
# tests that patch. FLAGs go to the build (-race). Uses $rel and $tmp.
fails_without() {
	local f=$1 p pkg out q tests
	shift
	p=$(sed -n "1s|^// cairn's regression test of patches/\([^ :]*\.patch\).*|\1|p" "$f")
	if [ -z "$p" ] || [ ! -f "$copy/patches/$p" ]; then
		echo "badger.sh: $f: its first line names no patch of $copy/patches" >&2
		exit 1
	fi
	pkg=$(basename "$(dirname "$f")")
	[ "$pkg" = root ] && pkg=.
	out=$tmp/without-${p%.patch}
	build_release "$out" "$rel"
	for q in "$copy"/patches/*.patch; do
		[ "$(basename "$q")" = "$p" ] && continue
		if ! patch -s -p1 -d "$out" --no-backup-if-mismatch < "$q"; then
			echo "badger.sh: $q does not apply without $p" >&2
			exit 1
		fi
	done
	install -m 0644 "$rel/go.sum" "$out/go.sum"
	install -m 0644 "$rel/$pkg"/*_test.go "$f" "$out/$pkg/"
	tests=$(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T) {$/\1/p' "$f" | paste -sd '|' -)
	if ! (cd "$out/$pkg" && go test -c -o "$out/regression.test" "$@" .); then
		echo "badger.sh: $f does not build without $p" >&2
		exit 1
	fi
	if (cd "$out/$pkg" && "$out/regression.test" -test.run "^($tests)\$" >"$out/log" 2>&1); then
		echo "badger.sh: $f passes without $p: it does not test what $p changes" >&2
		exit 1
	fi
	echo "badger.sh: ${f#"$copy"/} fails without $p, as it must:"
	grep -E -e '^--- FAIL' -e '_test\.go:[0-9]+: .' -e '^[[:space:]]+Error:' "$out/log" | head -n 8 | cut -c1-200
}

case "${1:-}" in
sync)
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	build "$tmp/badger"
	rewrite "$tmp/badger"
	rm -rf "$copy"
	mv "$tmp/badger" "$copy"
	echo "badger.sh: $copy is $module@$version plus $(ls "$copy"/patches/*.patch | wc -l) patches"
	;;
check)
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	build "$tmp/badger"
	rewrite "$tmp/badger"
	if ! diff -r "$tmp/badger" "$copy"; then
		echo "badger.sh: $copy differs from $module@$version plus its patches (above: < the rebuilt tree, > the copy); change a patch, then run scripts/badger.sh sync" >&2
		exit 1
	fi
	echo "badger.sh: $copy is $module@$version plus its patches"
	;;
test)
	shift
	rel=$(release)
	pkgs=$(field tests)
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	# The tests run on the copy before the rewrite: the tree that sync
	# builds, with the release's import paths and go.mod. It is the
	# copy, rewritten.
	build "$tmp/badger"
	cp -r "$tmp/badger" "$tmp/rewritten"
	rewrite "$tmp/rewritten"
	if ! diff -r -q "$tmp/rewritten" "$copy" >&2; then
		echo "badger.sh: $copy is not $module@$version plus its patches, rewritten: run scripts/badger.sh check" >&2
		exit 1
	fi
	install -m 0644 "$rel/go.sum" "$tmp/badger/go.sum"
	# go vet finds what it finds in the release too (copied locks in
	# publisher.go): the copy must add no finding of its own. Lines
	# move with the patches, so findings are compared without them.
	vetted() { (cd "$1" && go vet ./... 2>&1 || true) | grep -v '^#' | sed -E 's/:[0-9]+:[0-9]+:/:/' | sort; }
	mkdir "$tmp/release"
	build_release "$tmp/release" "$rel"
	cp "$tmp/badger/go.sum" "$tmp/release/go.sum"
	new=$(comm -13 <(vetted "$tmp/release") <(vetted "$tmp/badger"))
	if [ -n "$new" ]; then
		echo "badger.sh: go vet finds in the copy what it does not in the release:" >&2
		echo "$new" >&2
		exit 1
	fi
	for pkg in $pkgs; do
		for f in "$rel/$pkg"/*_test.go; do
			install -m 0644 "$f" "$tmp/badger/$pkg/"
		done
		if [ -d "$rel/$pkg/testdata" ]; then
			cp -r "$rel/$pkg/testdata" "$tmp/badger/$pkg/"
		fi
	done
	# cairn's regression tests of its patches, in _tests/ (the go
	# command skips a directory whose name starts with _), by package.
	if [ -d "$copy/_tests" ]; then
		for f in "$copy"/_tests/*/*_test.go; do
			d=$(basename "$(dirname "$f")")
			[ "$d" = root ] && d=.
			install -m 0644 "$f" "$tmp/badger/$d/"
		done
	fi
	for f in "$rel"/*_test.go; do
		install -m 0644 "$f" "$tmp/badger/"
	done
	roottests=$(field roottests)
	(cd "$tmp/badger" && go test -count=1 "$@" $pkgs)
	(cd "$tmp/badger" && go test -count=1 "$@" -run "$roottests" .)
	if [ -d "$copy/_tests" ]; then
		for f in "$copy"/_tests/*/*_test.go; do
			fails_without "$f" "$@"
		done
	fi
	;;
tree)
	out=${2:-}
	case $out in "" | /*) ;; *) out=$here/$out ;; esac
	if [ $# -ne 2 ] || [ -z "$out" ] || [ -e "$out" ]; then
		echo "usage: scripts/badger.sh tree DIR (DIR must not exist)" >&2
		exit 2
	fi
	build "$out"
	echo "badger.sh: $out is $module@$version plus its patches, before the rewrite"
	;;
*)
	echo "usage: scripts/badger.sh sync|check|test|tree DIR" >&2
	exit 2
	;;
esac
