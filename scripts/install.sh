#!/bin/sh
# Installs cairn as a systemd service from a built binary, for systems
# without the .deb:
#
#   scripts/install.sh [BINARY]      (default: dist/cairn-linux-ARCH)
#
# It installs the binary as /usr/local/bin/cairn, the unit as
# /etc/systemd/system/cairn.service, /etc/cairn/cairn.yaml unless one
# exists, and creates the cairn user and /var/lib/cairn. With DESTDIR set
# it installs into that directory as a root file system and leaves the
# running system alone. Then: systemctl enable --now cairn
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)

case "$(uname -m)" in
aarch64 | arm64) arch=arm64 ;;
x86_64 | amd64) arch=amd64 ;;
*) arch=$(uname -m) ;;
esac
bin=${1:-$repo/dist/cairn-linux-$arch}
root=${DESTDIR:-}
if [ ! -f "$bin" ]; then
	echo "install.sh: no binary at $bin; build one with scripts/build-release.sh" >&2
	exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "install.sh: run as root" >&2
	exit 1
fi

install -D -m 0755 "$bin" "$root/usr/local/bin/cairn"
install -d -m 0755 "$root/etc/systemd/system"
sed 's#^ExecStart=/usr/bin/cairn #ExecStart=/usr/local/bin/cairn #' "$repo/systemd/cairn.service" >"$root/etc/systemd/system/cairn.service"
chmod 0644 "$root/etc/systemd/system/cairn.service"
grep -q '^ExecStart=/usr/local/bin/cairn ' "$root/etc/systemd/system/cairn.service" ||
	{ echo "install.sh: systemd/cairn.service has no 'ExecStart=/usr/bin/cairn ' line to point at /usr/local/bin" >&2; exit 1; }
install -D -m 0644 "$repo/packaging/sysusers.conf" "$root/etc/sysusers.d/cairn.conf"
install -D -m 0644 "$repo/packaging/tmpfiles.conf" "$root/etc/tmpfiles.d/cairn.conf"
if [ -e "$root/etc/cairn/cairn.yaml" ]; then
	echo "install.sh: keeping $root/etc/cairn/cairn.yaml"
else
	install -d -m 0755 "$root/etc/cairn"
	sh "$repo/packaging/cairn-yaml.sh" >"$root/etc/cairn/cairn.yaml"
	chmod 0644 "$root/etc/cairn/cairn.yaml"
fi
systemd-sysusers ${root:+--root="$root"} cairn.conf
systemd-tmpfiles --create ${root:+--root="$root"} cairn.conf

if [ -z "$root" ] && [ -d /run/systemd/system ]; then
	systemctl daemon-reload
	systemctl try-restart cairn.service
	echo "install.sh: installed; start it with: systemctl enable --now cairn"
else
	echo "install.sh: installed into ${root:-/} (systemd is not running there: not reloaded)"
fi
