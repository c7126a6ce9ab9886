#!/usr/bin/env bash
# Runs cairn's whole test suite on a Debian machine with Go installed:
# installs what the tests need (Mosquitto, FUSE, InfluxDB 1.x and
# VictoriaMetrics as upstreams for the uplink, qemu-user for the arm and
# arm64 builds, systemd for systemd-analyze and systemd-sysusers, e2fsprogs
# for the full-disk tests' ext4 images, patch for scripts/badger.sh and
# scripts/thirdparty.sh, chromium for the dashboard's tests in a headless
# browser), then
# gofmt, go vet, the check that third_party/badger is its release plus its
# patches (with the release's own tests of what they change), the check
# that third_party/paho and third_party/mochi are their releases plus
# their patches, the check
# that `go install github.com/cairn-gateway/cairn/cmd/cairn@VERSION` works
# (scripts/goinstall.sh, in a git work tree) and the tests under the race
# detector. Needs root for
# apt-get, for the FUSE mounts of the power-cut and watchdog tests, and
# for installing the .deb into a throw-away root, and for the full-disk
# tests' tmpfs and loop-device mounts.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || need_pkgs+=(mosquitto)
command -v mosquitto_pub >/dev/null 2>&1 || need_pkgs+=(mosquitto-clients)
command -v fusermount3 >/dev/null 2>&1 || need_pkgs+=(fuse3)
command -v influxd >/dev/null 2>&1 || need_pkgs+=(influxdb)
command -v victoria-metrics >/dev/null 2>&1 || need_pkgs+=(victoria-metrics)
command -v prometheus >/dev/null 2>&1 || need_pkgs+=(prometheus)
command -v qemu-arm >/dev/null 2>&1 && command -v qemu-aarch64 >/dev/null 2>&1 || need_pkgs+=(qemu-user)
command -v systemd-analyze >/dev/null 2>&1 && command -v systemd-sysusers >/dev/null 2>&1 || need_pkgs+=(systemd)
command -v mkfs.ext4 >/dev/null 2>&1 || [ -x /usr/sbin/mkfs.ext4 ] || [ -x /sbin/mkfs.ext4 ] || need_pkgs+=(e2fsprogs)
command -v patch >/dev/null 2>&1 || need_pkgs+=(patch)
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || need_pkgs+=(iproute2)
command -v chromium >/dev/null 2>&1 || need_pkgs+=(chromium)
command -v curl >/dev/null 2>&1 || need_pkgs+=(curl)
# The Pi guide's test runs the HTTP guide's shell lines in a root without a
# C library: busybox-static's busybox.
[ -x /bin/busybox ] || need_pkgs+=(busybox-static)
if [ ${#need_pkgs[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "test.sh: missing ${need_pkgs[*]}; run as root or: sudo apt-get install ${need_pkgs[*]}" >&2
		exit 1
	fi
	echo "test.sh: installing ${need_pkgs[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi
# Debian installs mosquitto in /usr/sbin, which a non-login shell may lack.
export PATH="$PATH:/usr/sbin:/sbin"

echo "test.sh: gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change: $unformatted" >&2
	exit 1
fi
echo "test.sh: go vet"
# Badger's copy is a part of cairn's module, so ./... holds its packages.
# scripts/badger.sh test fails on any finding of go vet's in the copy that
# the release does not have.
go vet ./...
echo "test.sh: binary size"
bash scripts/binsize.sh
echo "test.sh: third_party/badger"
bash scripts/badger.sh check
bash scripts/badger.sh test -race
echo "test.sh: third_party/paho, third_party/mochi"
bash scripts/thirdparty.sh third_party/paho check
bash scripts/thirdparty.sh third_party/mochi check
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	echo "test.sh: go install"
	bash scripts/goinstall.sh
else
	echo "test.sh: go install: skipped, not in a git work tree"
fi
echo "test.sh: go test -race"
go test -race -count=1 -timeout 30m "$@" ./...
