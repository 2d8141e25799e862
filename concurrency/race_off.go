//go:build !race

package concurrency

// raceEnabled reports that the race detector is on (see touchBucket).
const raceEnabled = false
