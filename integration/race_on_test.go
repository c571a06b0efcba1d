//go:build race

package integration

// raceOn: the race detector instruments this build (several times the
// CPU per operation).
const raceOn = true
