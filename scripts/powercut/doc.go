// Package powercut proves cairn's first promise — an acknowledged reading
// is on disk — by cutting the power under a loaded gateway, over and over.
//
// The package holds tests only. They run a real `cairn run` process with
// its data directory on cutfs (scripts/cutfs), a FUSE file system that
// drops every write not yet fsynced when told to "cut the power", and a
// real MQTT publisher that records which messages got their PUBACK:
//
//   - TestPowerCut_AckedReadingsSurvive runs cycles of load, SIGKILL, cut,
//     remount and restart, and after each one checks that every
//     acknowledged reading is in the store exactly once.
//   - TestPowerCut_ControlLosesWithoutSync runs the same cycles with the
//     group commit's fsync turned off (CAIRN_UNSAFE_NO_SYNC=1) and fails
//     unless acknowledged readings are lost: otherwise the layer would
//     simulate nothing and the first test would prove nothing.
//   - TestPowerCut_IngestSlowdown logs how much slower ingest is on the
//     layer than on a plain directory.
//
// The tests need root, /dev/fuse and fusermount3 (Debian package fuse3),
// and fail, rather than skip, without them. CAIRN_POWERCUT_CYCLES sets the
// number of cycles of the first test (default 20); scripts/powercut.sh runs
// long series and prints the figures. docs/reliability.md explains what is
// simulated, what is not, and the figures measured.
package powercut
