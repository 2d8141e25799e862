package adaptive

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// histogram counts latencies in log-linear buckets: 8 per power of two from
// 1µs, so a percentile read from it is within 1/16 (6.25%) of a sample in
// that bucket. Adds are one atomic increment; a read-and-reset happens once
// per window.
type histogram struct {
	counts [histBuckets]atomic.Uint32
}

const (
	histSub     = 8  // buckets per power of two
	histMinExp  = 10 // 2^10 ns ~ 1µs: everything below is bucket 0
	histBuckets = 256
)

func histIndex(ns int64) int {
	if ns < 1<<histMinExp {
		return 0
	}
	e := bits.Len64(uint64(ns)) - 1
	sub := int(ns>>(e-3)) & (histSub - 1)
	return min(histBuckets-1, (e-histMinExp)*histSub+sub+1)
}

// histLower returns the smallest value of bucket i and the bucket width.
func histLower(i int) (lower, width int64) {
	if i == 0 {
		return 0, 1 << histMinExp
	}
	e := (i-1)/histSub + histMinExp
	sub := int64((i - 1) % histSub)
	return (histSub + sub) << (e - 3), 1 << (e - 3)
}

func (h *histogram) add(ns int64) { h.counts[histIndex(ns)].Add(1) }

// takePercentile resets the histogram and returns the p-quantile of what it
// held, interpolated inside its bucket; zero when it was empty. The total is
// taken from the buckets themselves, so a sample racing with the reset is
// either wholly in this window or wholly in the next.
func (h *histogram) takePercentile(p float64) time.Duration {
	var local [histBuckets]int64
	var n int64
	for i := range h.counts {
		local[i] = int64(h.counts[i].Swap(0))
		n += local[i]
	}
	if n == 0 {
		return 0
	}
	rank := min(max(int64(p*float64(n)+0.5), 1), n)
	var cum int64
	for i, c := range local {
		if c > 0 && cum+c >= rank {
			lower, width := histLower(i)
			// The rank-th sample's share of the bucket, at its centre.
			return time.Duration(lower + (2*(rank-cum)-1)*width/(2*c))
		}
		cum += c
	}
	return 0 // unreachable: rank <= n
}
