// Package release checks what cairn ships to a Raspberry Pi: the systemd
// unit, the binaries and .debs of scripts/build-release.sh, and
// scripts/install.sh.
//
// The package holds tests only:
//
//   - TestUnit_Verify runs `systemd-analyze verify` on systemd/cairn.service.
//   - TestUnit_Exposure runs `systemd-analyze security --offline=true` on it
//     and fails above an exposure of 2.0.
//   - TestRelease_BinariesAndDebs runs scripts/build-release.sh and checks
//     that the binaries are static, stripped and stamped, that each .deb
//     holds what docs/raspberry-pi.md says, and installs the amd64 one into
//     a throw-away root with `dpkg --root` (maintainer scripts included),
//     runs the Pi guide in it (as TestPiGuide_LetSensorsIn does), then
//     reinstalls, removes and purges it.
//   - TestInstallScript_DESTDIR runs scripts/install.sh into a throw-away
//     root.
//   - TestPiGuide_LetSensorsIn runs the commands of docs/raspberry-pi.md's
//     "Let sensors in", read from the page, in a root made by
//     scripts/install.sh (chroot, as root and as the cairn user) and a
//     network namespace of its own, and publishes with the password.
//
// They need root, systemd-analyze (Debian package systemd), dpkg-deb,
// qemu-aarch64 (qemu-user), ip (iproute2) and mosquitto_pub
// (mosquitto-clients), and fail, rather than skip, without them.
// scripts/test.sh installs what is missing.
package release
