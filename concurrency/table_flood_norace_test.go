//go:build !race

package concurrency

// tableFloodKeys is the number of distinct keys of TestTableKeyFlood.
const tableFloodKeys = 10_000_000

// tableRaceEnabled reports whether the tests run under the race detector.
const tableRaceEnabled = false
