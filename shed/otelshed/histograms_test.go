package otelshed_test

import (
	"maps"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/otelshed"
)

// fakeController reports to an Observer what a Controller would: a
// scripted run of queue waits and decisions, with their figures known.
type fakeController struct{ o shed.Observer }

// run reports, for the rule "db": two attempts that waited 2ms and 30ms
// for a permit and got it, one that waited 250ms and was shed; and the
// three decisions they ended in, plus one quick admission and one over
// the limit.
func (f fakeController) run() {
	f.o.ObserveQueueWait("db", 2*time.Millisecond, true)
	f.o.ObserveDecision(shed.Admitted, 2*time.Millisecond+3*time.Microsecond)
	f.o.ObserveQueueWait("db", 30*time.Millisecond, true)
	f.o.ObserveDecision(shed.Admitted, 30*time.Millisecond+3*time.Microsecond)
	f.o.ObserveQueueWait("db", 250*time.Millisecond, false)
	f.o.ObserveDecision(shed.Shedding, 250*time.Millisecond+3*time.Microsecond)
	f.o.ObserveDecision(shed.Admitted, 700*time.Nanosecond)
	f.o.ObserveDecision(shed.OverLimit, 4*time.Microsecond)
}

// nonEmptyBuckets returns the counts of s's buckets that hold at least
// one observation, keyed by their upper bound (2^62 for the last, +Inf).
func nonEmptyBuckets(s sample) map[float64]uint64 {
	out := map[float64]uint64{}
	for i, n := range s.hist.BucketCounts {
		if n == 0 {
			continue
		}
		ub := float64(1 << 62)
		if i < len(s.hist.Bounds) {
			ub = s.hist.Bounds[i]
		}
		out[ub] = n
	}
	return out
}

// Each observation lands in the bucket of its duration, in seconds, under
// its rule and outcome; counts and sums are the script's.
func TestHistogramsRecordObserverFigures(t *testing.T) {
	r, mp := newReader(t)
	m, err := otelshed.New(mp, newController(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unregister()
	fakeController{m}.run()

	type want struct {
		count   uint64
		sum     float64
		buckets map[float64]uint64
	}
	wants := map[string]want{
		"sluice.queue.wait.duration{sluice.outcome=admitted,sluice.rule.name=db}": {2, 0.032, map[float64]uint64{0.0025: 1, 0.05: 1}},
		"sluice.queue.wait.duration{sluice.outcome=rejected,sluice.rule.name=db}": {1, 0.25, map[float64]uint64{0.25: 1}},
		"sluice.decision.duration{sluice.outcome=admitted}":                       {3, 0.032006 + 0.0000007, map[float64]uint64{1e-6: 1, 0.0025: 1, 0.05: 1}},
		// 0.250003 s is past the 0.25 bound: in the bucket up to 0.5.
		"sluice.decision.duration{sluice.outcome=shedding}":   {1, 0.250003, map[float64]uint64{0.5: 1}},
		"sluice.decision.duration{sluice.outcome=over_limit}": {1, 0.000004, map[float64]uint64{5e-6: 1}},
	}

	seen := 0
	for _, s := range gather(t, r) {
		if s.kind != "histogram" {
			continue
		}
		seen++
		w, ok := wants[s.series()]
		if !ok {
			t.Errorf("unexpected series %s", s.series())
			continue
		}
		if s.unit != "s" || s.hist.Count != w.count || !near(s.hist.Sum, w.sum) {
			t.Errorf("%s: unit %q, count %d, sum %g; want s, %d, %g", s.series(), s.unit, s.hist.Count, s.hist.Sum, w.count, w.sum)
		}
		if got := nonEmptyBuckets(s); !maps.Equal(got, w.buckets) {
			t.Errorf("%s: buckets %v, want %v", s.series(), got, w.buckets)
		}
	}
	if seen != len(wants) {
		t.Errorf("%d histogram series, want %d", seen, len(wants))
	}
}

// A negative duration (a clock that stepped back) and a kind shed does
// not define are not recorded.
func TestHistogramsDropWhatCannotBeTrue(t *testing.T) {
	r, mp := newReader(t)
	m, err := otelshed.New(mp, newController(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unregister()
	m.ObserveQueueWait("db", -time.Millisecond, true)
	m.ObserveDecision(shed.Admitted, -time.Nanosecond)
	m.ObserveDecision(shed.Penalized+1, time.Millisecond)
	for _, s := range gather(t, r) {
		if s.kind == "histogram" {
			t.Errorf("recorded %s: count %d", s.series(), s.hist.Count)
		}
	}
}

// Once a rule has been seen, an observation allocates nothing in
// otelshed (the noop provider records nothing, so only this package's
// own work is counted).
func TestObserveAllocatesNothing(t *testing.T) {
	m, err := otelshed.New(noop.NewMeterProvider(), newController(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unregister()
	m.ObserveQueueWait("db", time.Millisecond, true)
	if n := testing.AllocsPerRun(100, func() {
		m.ObserveQueueWait("db", time.Millisecond, true)
		m.ObserveQueueWait("db", time.Millisecond, false)
		m.ObserveDecision(shed.Shedding, time.Microsecond)
	}); n != 0 {
		t.Errorf("%v allocations per observation", n)
	}
}

func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }
