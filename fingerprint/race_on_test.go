//go:build race

package fingerprint

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// pooled paths allocate now and then and allocation counts are skipped.
const raceEnabled = true
