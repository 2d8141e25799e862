//go:build !race

package penalty

// The flood is 10 million keys into 2^16 entries without the race detector.
const (
	floodKeys     = 10_000_000
	floodCapacity = 1 << 16
)

// boxRaceEnabled reports whether the tests run under the race detector.
const boxRaceEnabled = false
