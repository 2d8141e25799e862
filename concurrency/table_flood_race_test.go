//go:build race

package concurrency

// tableFloodKeys is the number of distinct keys of TestTableKeyFlood. The race
// detector makes every atomic operation of the full-table path (up to 16
// compare-and-swaps per overflowing key) some 50 times slower, so under
// -race the flood is 250,000 keys: still 2.5 times the capacity, enough to
// fill the table with live entries, overflow and evict.
const tableFloodKeys = 250_000

// tableRaceEnabled reports whether the tests run under the race detector.
const tableRaceEnabled = true
