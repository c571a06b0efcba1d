// Package filter holds what presenced's stages must read in an MQTT topic
// filter exactly as mochi reads it.
package filter
