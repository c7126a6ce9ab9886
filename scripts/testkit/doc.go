// Package testkit is what the tests of cairn's packages share: a Go
// command built once (Binary) and cairn's config (LocalConfig,
// WriteConfig); a
// process with its output kept as lines to wait on (Process, Lines), and
// `cairn run` as one, with the addresses it listens on (StartCairn); an
// MQTT publisher that behaves like a sensor, alone or with a window of
// unacknowledged messages (ConnectPublisher, ConnectWindow); small file
// systems and filling them (MountFS, Fill) and the cutfs power-cut layer
// (MountCutfs); a network namespace of a test's own, where fixed ports
// are free (NewNetns); the payload fixtures (LoadFixtures); a store with
// its Writer running for the test (StartWriter); and an HTTP client from a
// loopback address of its own (HTTPClientFrom). It is for tests only;
// nothing in the cairn binary imports it, and of cairn's packages it
// imports only buffer, whose own tests therefore keep their startWriter.
package testkit
