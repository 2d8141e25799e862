//go:build !race

package queueing

const raceEnabled = false

// hammerGoroutines and hammerLimit size TestHammer (see race_on_test.go).
const hammerGoroutines, hammerLimit = 1000, 50

// fastPathIters sizes TestFastPathHammer (see race_on_test.go).
const fastPathIters = 4000
