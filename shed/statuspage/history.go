package statuspage

import (
	"time"

	"github.com/sluicehq/sluice/shed"
)

// sample is what the history keeps of one Stats snapshot: the counters
// that rates are made of and the gauges that charts show.
type sample struct {
	at                                       int64 // monotonic ns
	admitted, overLimit, shedding, penalized uint64
	queueWaits                               uint64
	queueWait                                time.Duration
	timeouts                                 uint64
	rules                                    []ruleSample
}

// ruleSample is one rule's part of a sample.
type ruleSample struct {
	name              string
	allowed, rejected uint64
	limit, inflight   int64
	waiting           int
}

func newSample(now int64, s *shed.Stats) sample {
	sm := sample{
		at: now, admitted: s.Admitted, overLimit: s.OverLimit, shedding: s.Shedding, penalized: s.Penalized,
		queueWaits: s.QueueWaits, queueWait: s.QueueWait, timeouts: s.Penalty.Timeouts,
		rules: make([]ruleSample, len(s.Rules)),
	}
	for i := range s.Rules {
		r := &s.Rules[i]
		sm.rules[i] = ruleSample{name: r.Name, allowed: r.Allowed, rejected: r.Rejected, limit: r.Limit, inflight: r.Inflight, waiting: r.Waiting}
	}
	return sm
}

// rule returns the sample's entry of the rule named name, or nil. The
// rules of most samples are those of the report, in its order: hint, the
// rule's index in the report, is tried first.
func (s *sample) rule(name string, hint int) *ruleSample {
	if hint < len(s.rules) && s.rules[hint].name == name {
		return &s.rules[hint]
	}
	for i := range s.rules {
		if s.rules[i].name == name {
			return &s.rules[i]
		}
	}
	return nil
}

// ring holds the newest samples, oldest first, at most len(buf). It is not
// safe for concurrent use (Page locks it).
type ring struct {
	buf   []sample
	start int // index of the oldest
	n     int
}

func (r *ring) push(s sample) {
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = s
		r.n++
		return
	}
	r.buf[r.start] = s
	r.start = (r.start + 1) % len(r.buf)
}

// at returns the i-th oldest sample, 0 <= i < r.n.
func (r *ring) at(i int) *sample { return &r.buf[(r.start+i)%len(r.buf)] }

// newest returns the newest sample, or nil when there is none.
func (r *ring) newest() *sample {
	if r.n == 0 {
		return nil
	}
	return r.at(r.n - 1)
}

// rate returns the change of a counter from a to b per second of the time
// between them, and false when it is unknown: no time passed, or the
// counter went back.
func rate(a, b uint64, from, to int64) (float64, bool) {
	if to <= from || b < a {
		return 0, false
	}
	return float64(b-a) / time.Duration(to-from).Seconds(), true
}
