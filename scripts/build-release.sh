#!/usr/bin/env bash
# Builds cairn's release files into dist/ (or $DIST):
#
#   cairn-linux-arm64, cairn-linux-amd64   static, stripped binaries
#   cairn_VERSION_arm64.deb, cairn_VERSION_amd64.deb
#   cairn.yaml                             the packaged /etc/cairn/cairn.yaml
#   SHA256SUMS
#
# VERSION defaults to the newest v* tag (git describe), else
# 0.0.0~gitDATE.COMMIT. Version, commit and date are stamped into the
# binaries (`cairn version` prints them); the date is the commit's, so a
# build of one commit is the same whenever it is made. The .debs are built
# with nfpm, installed from the Go module proxy into $DIST/tools. The
# build tags in scripts/release-tags leave out what cairn does not use
# (docs/performance.md): Badger's ZSTD compression, net/http's HTTP/2 and
# the profiles (runtime/pprof).
set -euo pipefail
cd "$(dirname "$0")/.."

NFPM_VERSION=v2.44.1
DIST=${DIST:-$PWD/dist}
commit=$(git rev-parse --short=12 HEAD)
date=$(TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD)
if [ -z "${VERSION:-}" ]; then
	if tag=$(git describe --tags --match 'v[0-9]*' 2>/dev/null); then
		VERSION=${tag#v}
	else
		VERSION=0.0.0~git$(TZ=UTC git log -1 --date=format-local:%Y%m%d --format=%cd HEAD).$commit
	fi
fi
if ! git diff --quiet HEAD -- 2>/dev/null; then
	echo "build-release.sh: the work tree has changes; the binaries say commit $commit-dirty" >&2
	commit=$commit-dirty
fi
mkdir -p "$DIST"
tags=$(tr -d ' \n' <scripts/release-tags)

for arch in arm64 amd64; do
	out="$DIST/cairn-linux-$arch"
	echo "build-release.sh: $out"
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=false -tags "$tags" \
		-ldflags "-s -w -X main.version=$VERSION -X main.commit=$commit -X main.date=$date" \
		-o "$out" ./cmd/cairn
done

sh packaging/cairn-yaml.sh >"$DIST/cairn.yaml"

echo "build-release.sh: nfpm $NFPM_VERSION"
GOBIN="$DIST/tools" go install "github.com/goreleaser/nfpm/v2/cmd/nfpm@$NFPM_VERSION"
for arch in arm64 amd64; do
	# nfpm expands variables in some fields only: fill them all in here.
	sed -e "s#\${ARCH}#$arch#g" -e "s#\${VERSION}#$VERSION#g" -e "s#\${DIST}#$DIST#g" \
		packaging/nfpm.yaml >"$DIST/nfpm-$arch.yaml"
	"$DIST/tools/nfpm" package --config "$DIST/nfpm-$arch.yaml" --packager deb \
		--target "$DIST/cairn_${VERSION}_$arch.deb"
done

(cd "$DIST" && sha256sum cairn-linux-* cairn_*.deb >SHA256SUMS)
ls -l "$DIST"/cairn-linux-* "$DIST"/cairn_*.deb
