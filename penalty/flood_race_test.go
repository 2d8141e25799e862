//go:build race

package penalty

// The flood is smaller under the race detector, which slows every atomic.
const (
	floodKeys     = 20_000
	floodCapacity = 1 << 10
)

// boxRaceEnabled reports whether the tests run under the race detector.
const boxRaceEnabled = true
