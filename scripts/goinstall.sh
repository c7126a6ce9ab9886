#!/usr/bin/env bash
# scripts/goinstall.sh proves that `go install
# github.com/cairn-gateway/cairn/cmd/cairn@VERSION` works, as it does for a
# user: the tracked files of the work tree become a module zip under a
# pseudo-version, served by a GOPROXY in a temporary directory, and the
# go command installs cairn from it into a temporary GOBIN, with a module
# cache of its own. `go install` refuses a module whose go.mod has a
# replace directive, and a module zip may hold no go.mod but the module's
# own: this fails if either comes back (third_party/badger/CAIRN.md says
# why Badger's copy is a part of cairn's module). It then checks that the
# binary's build info names that version and that `cairn version` runs.
#
# The modules cairn requires come from the local module cache, else from
# the Go module proxy (GOPROXY as set). -trimpath lets a second run reuse
# the build cache, although the module cache is a new one each time.
set -euo pipefail
cd "$(dirname "$0")/.."

module=$(awk '$1 == "module" { print $2 }' go.mod)
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT

# A commit of the tracked files as they are in the work tree, which no
# branch points at; HEAD when none is changed.
rev=$(git stash create)
rev=${rev:-HEAD}
stamp() { TZ=UTC git log -1 --date=format-local:"$1" --format=%cd "$rev"; }
version=v0.0.0-$(stamp %Y%m%d%H%M%S)-$(git rev-parse --short=12 "$rev")

# The GOPROXY protocol, for one version (cairn's module path has no
# upper-case letters to escape).
dir=$tmp/proxy/$module/@v
mkdir -p "$dir"
echo "$version" >"$dir/list"
printf '{"Version":"%s","Time":"%s"}\n' "$version" "$(stamp %Y-%m-%dT%H:%M:%SZ)" >"$dir/$version.info"
git show "$rev:go.mod" >"$dir/$version.mod"
git archive --format=zip --prefix="$module@$version/" -o "$dir/$version.zip" "$rev"

echo "goinstall.sh: go install $module/cmd/cairn@$version"
GOPROXY="file://$tmp/proxy,file://$(go env GOMODCACHE)/cache/download,$(go env GOPROXY)" \
	GONOSUMDB=$module GOFLAGS=-modcacherw GOMODCACHE=$tmp/mod GOBIN=$tmp/bin \
	go install -trimpath "$module/cmd/cairn@$version"

info=$(go version -m "$tmp/bin/cairn")
echo "$info"
got=$(echo "$info" | awk '$1 == "mod" { print $2, $3 }')
if [ "$got" != "$module $version" ]; then
	echo "goinstall.sh: the build info names the module $got, want $module $version" >&2
	exit 1
fi
"$tmp/bin/cairn" version
