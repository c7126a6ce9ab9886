// Package payload turns the payload of one MQTT message into readings: the
// formats (JSON, SenML, InfluxDB line protocol, plain values), the device
// presets (which topics of a family carry readings, and how to read them),
// and the mappings of a configured JSON layout.
//
// It does no I/O, starts no goroutine and keeps no state between calls
// but a Decoder's own buffers and name cache, as buffer/encoding is for
// the store: what a message teaches about other messages (a unit) goes to
// the Units its caller gives. Which topics a route takes, and who may
// publish on them, is the gateway's to decide.
package payload
