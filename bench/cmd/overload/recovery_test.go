package main

import (
	"io"
	"math"
	"testing"
	"time"
)

func buckets(good, due []int64) []bucket {
	bs := make([]bucket, len(good))
	for i := range bs {
		bs[i] = bucket{Due: due[i], Good: good[i]}
	}
	return bs
}

// TestRecoveredAfterIsTheFirstPassAfterTheFirstFailure: the recovery time
// is the start of the first passing window after the first failing one
// (zero when none fails: it never went bad); a passing window before the
// trouble starts does not count, a relapse after the recovery does not
// undo it, and a range with no pass after its first failure never
// recovered.
func TestRecoveredAfterIsTheFirstPassAfterTheFirstFailure(t *testing.T) {
	due := []int64{10, 10, 10, 10, 10, 10, 10, 10, 10, 10}
	ok := goodputBack(0.95)
	for _, c := range []struct {
		name string
		good []int64
		lo   int
		want int
		rec  bool
	}{
		{"never bad", []int64{10, 10, 10, 10, 10, 10, 10, 10, 10, 10}, 0, 0, true},
		{"after two buckets", []int64{0, 0, 10, 10, 10, 10, 10, 10, 10, 10}, 0, 2, true},
		{"trouble that starts late", []int64{10, 10, 10, 0, 10, 10, 10, 10, 10, 10}, 0, 4, true},
		{"a relapse does not undo it", []int64{0, 0, 10, 10, 10, 0, 10, 10, 10, 10}, 0, 2, true},
		{"never", []int64{10, 10, 10, 10, 10, 10, 10, 10, 10, 0}, 0, 0, false},
		{"from lo", []int64{0, 0, 0, 0, 10, 10, 10, 10, 10, 10}, 2, 2, true},
		{"one short bucket in a window fails it", []int64{10, 10, 10, 10, 10, 10, 10, 8, 10, 10}, 0, 0, false},
	} {
		n, rec := recoveredAfter(buckets(c.good, due), c.lo, len(due), 3, ok)
		if n != c.want || rec != c.rec {
			t.Errorf("%s: recoveredAfter = %d, %v; want %d, %v", c.name, n, rec, c.want, c.rec)
		}
	}
	if _, rec := recoveredAfter(buckets([]int64{10, 10}, []int64{10, 10}), 0, 2, 3, ok); rec {
		t.Error("a range shorter than a window recovered")
	}
	if goodputBack(0.95)([]bucket{{Due: 0, Good: 0}}) {
		t.Error("a window with nothing due counts as recovered")
	}
}

func TestP99BelowNeedsAnAnswerUnderTheLimit(t *testing.T) {
	lats := make([]int64, 100)
	for i := range lats {
		lats[i] = int64(i + 1) // p99 = 99
	}
	w := []bucket{{LatsUS: lats[:50]}, {LatsUS: lats[50:]}}
	if !p99Below(100)(w) || p99Below(99)(w) {
		t.Errorf("p99 of 1..100 is 99: want below 100 and not below 99")
	}
	if p99Below(1e9)([]bucket{{Due: 5}}) {
		t.Error("a window with no good answer counts as recovered")
	}
}

// recoveryCell builds a cell of three phases of per buckets each: in the
// 1x phase goodput is back from bucket goodAt on, after the drop p99 is
// back (10 ms against 100 ms before) from bucket p99At on.
func recoveryCell(goodAt, p99At int) cell {
	per := int(recoveryPhase / recoveryBucket)
	bs := make([]bucket, 3*per)
	for i := range bs {
		bs[i] = bucket{Due: 20, Good: 20, LatsUS: []int64{10_000}}
		switch {
		case i >= per && i < 2*per && i-per < goodAt:
			bs[i].Good, bs[i].LatsUS = 5, nil
		case i >= 2*per && i-2*per < p99At:
			bs[i].LatsUS = []int64{100_000}
		}
	}
	return cell{Scenario: "recovery", Contender: "sluice", Multiple: 5, Load: loadResult{Buckets: bs, MaxLagUS: 12_000}}
}

func TestRecoveryOfReadsEachPhase(t *testing.T) {
	f := recoveryOf(recoveryCell(4, 6), 10_000) // back under 2 x 10 ms
	if f.goodBackMS != 400 || f.p99BackMS != 600 {
		t.Errorf("recovery after %v / %v ms, want 400 / 600", f.goodBackMS, f.p99BackMS)
	}
	per := float64(recoveryPhase / recoveryBucket)
	if want := (4*5 + (per-4)*20) / (per * 20); math.Abs(f.goodput1x-want) > 1e-9 {
		t.Errorf("answered in the 1x phase %v, want %v", f.goodput1x, want)
	}
	if f.p99Drop != 100 || f.lagMS != 12 {
		t.Errorf("p99 after the drop %v ms, generator lag %v ms; want 100 and 12", f.p99Drop, f.lagMS)
	}
	f = recoveryOf(recoveryCell(4, 1000), 10_000)
	if !math.IsNaN(f.p99BackMS) {
		t.Errorf("p99 never back, got %v ms", f.p99BackMS)
	}
	failed := recoveryCell(0, 0)
	failed.Err = "overload: boom"
	if f := recoveryOf(failed, 10_000); !math.IsNaN(f.goodBackMS) {
		t.Errorf("a failed cell recovered after %v ms", f.goodBackMS)
	}
}

func TestRecoveryTableSaysNever(t *testing.T) {
	sc := scenario{name: "recovery", recovery: true, slots: 8, wait: 20 * time.Millisecond, multiples: []float64{5}, capacity: 400, after: 200}
	rep := &report{
		Config: map[string]string{}, Unloaded: map[string]float64{"recovery": 10_000},
		contenders: []string{"sluice", "none"}, scenarios: []scenario{sc},
	}
	for r := range 3 {
		c := recoveryCell(2+r, 3)
		c.Round = r
		n := recoveryCell(4, 1000)
		n.Contender, n.Round = "none", r
		rep.Cells = append(rep.Cells, c, n)
	}
	checkTableHas(t, rep, "| sluice | 5x | 300 (200-400) | 300 |", "| none | 5x | 400 | never (3 of 3) | 0.80 | 100 | 12 |", "unloaded p99 after the drop 10.0 ms")
}

// TestWindowBucketsCountDueAndGoodOverTheWholeCell: buckets cover the cell
// from its start, the warm-up too; each answer lands in the bucket it
// completed in, counted as the window counts it (a late 200 is a
// timeout), and each bucket gets the dials made by its arrivals.
func TestWindowBucketsCountDueAndGoodOverTheWholeCell(t *testing.T) {
	start := time.Unix(1000, 0)
	w := &window{start: start, from: 500 * time.Millisecond, to: time.Second, deadline: time.Second,
		bucket: 100 * time.Millisecond, buckets: make([]bucket, 10)}
	w.due(50*time.Millisecond, 0)
	w.due(60*time.Millisecond, 3)
	w.due(950*time.Millisecond, 4)
	w.due(2*time.Second, 9) // past the cell: no bucket
	w.record(start.Add(120*time.Millisecond), 30*time.Millisecond, 200, nil)
	w.record(start.Add(130*time.Millisecond), 2*time.Second, 200, nil) // too late
	w.record(start.Add(140*time.Millisecond), time.Millisecond, 503, nil)
	w.record(start.Add(150*time.Millisecond), time.Millisecond, 0, io.ErrUnexpectedEOF)
	w.record(start.Add(700*time.Millisecond), 40*time.Millisecond, 200, nil)
	w.closeBuckets(6)
	if w.buckets[0].Due != 2 || w.buckets[9].Due != 1 {
		t.Errorf("due %+v", w.buckets)
	}
	if b := w.buckets[1]; b.Good != 1 || len(b.LatsUS) != 1 || b.LatsUS[0] != 30_000 || b.Timeouts != 1 || b.Shed != 1 || b.Errors != 1 {
		t.Errorf("bucket 1 = %+v, want one good answer of 30 ms, one late, one shed, one failed", b)
	}
	if w.buckets[7].Good != 1 || w.res.Good != 1 || w.res.Timeouts != 0 || w.res.Shed != 0 {
		t.Errorf("bucket 7 %+v, window %+v: want the answer at 700 ms in both, the warm-up's in neither window count", w.buckets[7], w.res)
	}
	// Three dials by the first bucket's latest arrival; the last bucket
	// with arrivals takes the rest, to the count at the end.
	if d0, d9 := w.buckets[0].Dials, w.buckets[9].Dials; d0 != 3 || d9 != 3 || w.buckets[5].Dials != 0 {
		t.Errorf("dials %d in bucket 0 and %d in bucket 9, want 3 and 3: %+v", d0, d9, w.buckets)
	}
}
