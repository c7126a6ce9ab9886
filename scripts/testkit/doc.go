// Package testkit is what the tests of cairn's packages share: a
// process's output kept as lines to wait on, an MQTT publisher that
// behaves like a sensor, and small file systems that fill up. It is for
// tests only; nothing in the cairn binary imports it.
package testkit
