//go:build !race

package adaptive

import "testing"

// The race detector makes sync.Pool drop items at random, so this runs
// without it.
func TestAcquireDoneDoesNotAllocate(t *testing.T) {
	alg, _ := NewDefault()
	l, _ := NewLimiter(alg, WithWindowSamples(10, 100))
	now := int64(1)
	allocs := testing.AllocsPerRun(10000, func() {
		tok, err := l.TryAcquireAt(now, Request{})
		if err != nil {
			t.Fatal(err)
		}
		now += 1000
		tok.DoneAt(now, Success)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Acquire/Done", allocs)
	}
	mustQuiet(t, l)
}
