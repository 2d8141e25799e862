package adaptive

import (
	"math"
	"runtime/metrics"
	"time"
)

// runtimeReader turns the cumulative runtime/metrics counters into
// per-window RuntimeSignals. It is used only at window boundaries, under the
// Limiter's window lock.
type runtimeReader struct {
	samples   []metrics.Sample
	prevSched []uint64
	prevGC    float64
	prevTotal float64
}

const (
	metricSched    = "/sched/latencies:seconds"
	metricGC       = "/cpu/classes/gc/total:cpu-seconds"
	metricCPU      = "/cpu/classes/total:cpu-seconds"
	metricMem      = "/memory/classes/total:bytes"
	metricReleased = "/memory/classes/heap/released:bytes"
	metricLimit    = "/gc/gomemlimit:bytes"
)

func newRuntimeReader() *runtimeReader {
	r := &runtimeReader{samples: []metrics.Sample{
		{Name: metricSched}, {Name: metricGC}, {Name: metricCPU},
		{Name: metricMem}, {Name: metricReleased}, {Name: metricLimit},
	}}
	r.read() // prime the cumulative counters
	return r
}

// read returns the signals since the previous read.
func (r *runtimeReader) read() RuntimeSignals {
	metrics.Read(r.samples)
	var s RuntimeSignals
	if v := r.samples[0].Value; v.Kind() == metrics.KindFloat64Histogram {
		h := v.Float64Histogram()
		if len(r.prevSched) != len(h.Counts) {
			r.prevSched = make([]uint64, len(h.Counts))
		}
		var n uint64
		for i, c := range h.Counts {
			n += c - r.prevSched[i]
		}
		rank := n - n/100 // the 99th percentile
		var cum uint64
		var sum float64 // seconds, each wait at the middle of its bucket
		for i, c := range h.Counts {
			d := c - r.prevSched[i]
			r.prevSched[i] = c
			lo, hi := h.Buckets[i], h.Buckets[i+1]
			if math.IsInf(hi, 0) {
				hi = lo
			}
			if math.IsInf(lo, 0) {
				lo = hi
			}
			if n > 0 && cum < rank && cum+d >= rank {
				s.SchedLatency = time.Duration(hi * 1e9)
			}
			sum += float64(d) * (lo + hi) / 2
			cum += d
		}
		if n > 0 {
			s.SchedMean = time.Duration(sum / float64(n) * 1e9)
		}
	}
	gc, total := r.float(1), r.float(2)
	if dt := total - r.prevTotal; dt > 0 {
		s.GCFraction = min(1, max(0, (gc-r.prevGC)/dt))
	}
	r.prevGC, r.prevTotal = gc, total
	if limit := r.uint(5); limit > 0 && limit < math.MaxInt64 {
		mem := r.uint(3) - min(r.uint(3), r.uint(4))
		s.HeapFraction = float64(mem) / float64(limit)
	}
	return s
}

func (r *runtimeReader) float(i int) float64 {
	if v := r.samples[i].Value; v.Kind() == metrics.KindFloat64 {
		return v.Float64()
	}
	return 0
}

func (r *runtimeReader) uint(i int) uint64 {
	if v := r.samples[i].Value; v.Kind() == metrics.KindUint64 {
		return v.Uint64()
	}
	return 0
}
