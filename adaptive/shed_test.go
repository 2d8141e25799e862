package adaptive

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// ioWindow is a window of an I/O-bound service with slots workers of
// service time each, driven at limit L by more demand than it serves: L
// requests inflight, a queue of L-slots in front of the slots.
func ioWindow(at int, L, slots int, service time.Duration) Window {
	lat := service * time.Duration(max(L, slots)) / time.Duration(slots)
	served := min(L, slots)
	count := int(int64(served) * int64(100*ms) / int64(service))
	start := int64(at) * int64(100*ms)
	return Window{Start: start, End: start + int64(100*ms), Count: count,
		RTT: lat, MinRTT: lat, MeanRTT: lat, MaxInflight: L}
}

// The I/O case of the out-of-process benchmark, as a recorded sequence: 8
// slots of 20ms under 5x the demand. Default starts at its minimum, so its
// first windows see the unqueued latency, and settles within the tolerance
// of it: no standing queue of twice the slots, as an initial limit above
// the true concurrency gave (limit 20-22 for 8 slots, p99 79ms).
func TestDefaultStartsLowAndSettlesNearTheTrueConcurrency(t *testing.T) {
	for _, slots := range []int{8, 32} {
		d, err := NewDefault()
		if err != nil {
			t.Fatal(err)
		}
		if d.Limit() != 4 {
			t.Fatalf("initial limit %d, want 4 (the minimum)", d.Limit())
		}
		var limits []int
		for i := range 100 {
			limits = append(limits, d.Update(ioWindow(i, d.Limit(), slots, 20*ms)))
		}
		if d.Baseline() != 20*ms {
			t.Errorf("%d slots: baseline %v, want the unqueued 20ms", slots, d.Baseline())
		}
		for _, L := range limits[50:] {
			if L < slots || float64(L) > 1.5*float64(slots) {
				t.Fatalf("%d slots: limit %d after settling (trace %v), want in [%d, %d]",
					slots, L, limits, slots, slots*3/2)
			}
		}
	}
}

// cpuWindow is a window of a CPU-bound handler on one core: in-handler
// latency flat at 1ms and one request inflight, whatever the queue in
// front of it; sched is the mean scheduling delay; arrived of which
// count completed and shed were shed.
func cpuWindow(at int, count, shed int, sched time.Duration) Window {
	start := int64(at) * int64(100*ms)
	return Window{Start: start, End: start + int64(100*ms), Count: count, Shed: shed,
		RTT: ms, MinRTT: ms, MeanRTT: ms, MaxInflight: 1,
		Runtime: RuntimeSignals{SchedLatency: 4 * sched, SchedMean: sched}}
}

// The CPU case as a recorded sequence: the latency the Limiter times stays
// flat at 1ms with one request inflight (no concurrency limit can bind)
// while the time work waits to be scheduled grows. Default must shed a
// growing share, leave the concurrency limit alone (it is not the
// actuator), and let the whole load in again once the delay is gone.
func TestDefaultShedsWhileSchedulingDelayGrowsAndHandlerLatencyIsFlat(t *testing.T) {
	d, err := NewDefault()
	if err != nil {
		t.Fatal(err)
	}
	limit := d.Limit()
	prev := d.ShedFraction()
	if prev != 0 {
		t.Fatalf("shed %v before any window", prev)
	}
	for i, sched := range []time.Duration{12 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms} {
		// The CPU completes 100 of 1000 arrivals: what is not shed queues.
		arrived := 1000
		shed := int(d.ShedFraction() * float64(arrived))
		d.Update(cpuWindow(i, 100, shed, sched))
		if got := d.ShedFraction(); got <= prev {
			t.Fatalf("window %d, delay %v: shed %v, not above %v", i, sched, got, prev)
		}
		prev = d.ShedFraction()
	}
	if d.Limit() != limit {
		t.Fatalf("the concurrency limit moved %d -> %d on a signal it cannot act on", limit, d.Limit())
	}
	// The overload ends: the delay falls under the target. Within ten
	// windows (one second at the Limiter's default windows) the whole load
	// is admitted again, even from the floor.
	d.admit = minAdmit
	for i := range 10 {
		d.Update(cpuWindow(10+i, 100, 0, ms))
	}
	if got := d.ShedFraction(); got != 0 {
		t.Fatalf("shed %v ten windows after the delay fell", got)
	}
}

func TestDefaultWithoutSchedulingSignalNeverSheds(t *testing.T) {
	d, err := NewDefault(WithoutSchedulingSignal())
	if err != nil {
		t.Fatal(err)
	}
	if d.usesRuntime() {
		t.Fatal("asks the Limiter for runtime signals")
	}
	for i := range 10 {
		d.Update(cpuWindow(i, 100, 0, time.Second))
	}
	if got := d.ShedFraction(); got != 0 {
		t.Fatalf("shed %v without the scheduling signal", got)
	}
	if _, err := NewDefault(WithSchedulingTarget(0)); err == nil {
		t.Fatal("a zero scheduling target accepted")
	}
	if _, err := NewGradient2(WithSchedulingTarget(ms)); err == nil {
		t.Fatal("Gradient2 accepted a scheduling target it does not use")
	}
}

// share is a Shedder with a set share.
type share struct {
	fixed
	f float64
}

func (s *share) ShedFraction() float64 { return s.f }

func TestLimiterShedsTheShedderShare(t *testing.T) {
	for _, f := range []float64{0, 0.1, 0.5, 0.9, 1} {
		alg := &share{fixed: fixed{limit: 1 << 20}, f: f}
		l, err := NewLimiter(alg)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.ShedFraction(); math.Abs(got-f) > 1e-9 {
			t.Fatalf("ShedFraction %v, want %v", got, f)
		}
		const n = 10_000
		shed := 0
		var toks []Token
		for range n {
			tok, err := l.TryAcquireAt(1, Request{})
			switch {
			case errors.Is(err, ErrShed):
				if errors.Is(err, ErrLimited) {
					t.Fatal("ErrShed matches ErrLimited: callers would wait")
				}
				shed++
			case err != nil:
				t.Fatal(err)
			default:
				toks = append(toks, tok)
			}
		}
		// The Weyl sequence spreads evenly: within 1% of the share.
		if math.Abs(float64(shed)/n-f) > 0.01 {
			t.Errorf("share %v: shed %d of %d", f, shed, n)
		}
		// A priority above Critical is never shed; Acquire does not wait
		// on a shed.
		if tok, err := l.TryAcquireAt(1, Request{Priority: 1}); err != nil {
			t.Errorf("share %v: CriticalPlus refused: %v", f, err)
		} else {
			toks = append(toks, tok)
		}
		if f == 1 {
			if _, err := l.Acquire(context.Background(), Request{}); !errors.Is(err, ErrShed) {
				t.Errorf("Acquire with everything shed: %v, want ErrShed", err)
			}
		}
		for _, tok := range toks {
			tok.DoneAt(2, Ignore)
		}
		mustQuiet(t, l)
	}
}

func TestWindowCountsTheShed(t *testing.T) {
	alg := &share{fixed: fixed{limit: 100}, f: 0.5}
	l, err := NewLimiter(alg, WithWindowSamples(1, 1), WithWindow(time.Nanosecond, time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	open, _ := l.TryAcquireAt(1, Request{})
	open.DoneAt(2, Success) // opens the window
	var tok Token
	shed := 0
	for range 100 {
		if tk, err := l.TryAcquireAt(3, Request{}); err == nil {
			if tok.s != nil {
				tk.DoneAt(3, Ignore)
				continue
			}
			tok = tk
		} else {
			shed++
		}
	}
	tok.DoneAt(4, Success)
	if len(alg.windows) != 1 || alg.windows[0].Shed != shed {
		t.Fatalf("windows %+v, want one with Shed %d", alg.windows, shed)
	}
	mustQuiet(t, l)
}

// Whatever the windows, the share Default lets through stays in [1/64, 1]
// (some work always finishes, so a window always closes to lift the
// shedding) and moves by at most half down and double up per window.
func TestDefaultShedShareStaysBounded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d, err := NewDefault()
		if err != nil {
			t.Fatal(err)
		}
		for i := range rapid.IntRange(1, 50).Draw(t, "windows") {
			w := cpuWindow(i, rapid.IntRange(0, 1000).Draw(t, "count"), rapid.IntRange(0, 1000).Draw(t, "shed"),
				time.Duration(rapid.Int64Range(0, int64(10*time.Second)).Draw(t, "sched")))
			before := 1 - d.ShedFraction()
			d.Update(w)
			f := d.ShedFraction()
			if f < 0 || f > 1-minAdmit+1e-12 || math.IsNaN(f) {
				t.Fatalf("shed share %v", f)
			}
			if after := 1 - f; after < 0.5*before-1e-12 && after > minAdmit || after > 2*before+minAdmit+1e-12 {
				t.Fatalf("share let through moved %v -> %v in one window", before, after)
			}
		}
	})
}

// The CPU case per request: a request that waited past Default's queue
// bound in front of the handler is shed at once, from the first window on
// (no window has closed, the share is still zero), whatever room the
// limit has; one within the bound and one above Critical are admitted;
// the sheds count in the window like the share's.
func TestDefaultShedsARequestThatWaitedPastItsQueueBound(t *testing.T) {
	d, err := NewDefault()
	if err != nil {
		t.Fatal(err)
	}
	if got := d.QueueBound(); got != 20*ms {
		t.Fatalf("queue bound %v, want 2 scheduling targets (20ms)", got)
	}
	l, err := NewLimiter(d)
	if err != nil {
		t.Fatal(err)
	}
	if l.QueueBound() != 20*ms {
		t.Fatalf("Limiter's queue bound %v", l.QueueBound())
	}
	now := int64(time.Hour)
	if _, err := l.TryAcquireAt(now, Request{Queued: 20*ms + 1}); !errors.Is(err, ErrShed) {
		t.Fatalf("waited 20ms+1ns: %v, want ErrShed", err)
	}
	for _, r := range []Request{{Queued: 20 * ms}, {}, {Queued: time.Second, Priority: 1}} {
		tok, err := l.TryAcquireAt(now, r)
		if err != nil {
			t.Fatalf("%+v: %v, want admitted", r, err)
		}
		tok.DoneAt(now+int64(ms), Success)
	}
	if got := l.shedCount.Load(); got != 1 {
		t.Fatalf("shed count %d, want 1", got)
	}
	if got := l.ShedByWait(); got != 1 {
		t.Fatalf("ShedByWait %d, want 1", got)
	}
	if l.ShedFraction() != 0 {
		t.Fatalf("the bound moved the share: %v", l.ShedFraction())
	}
}

// boundWindow runs one window of l at start: shedWaits requests that
// waited a second, each of which must be shed, then served ones that
// waited 1ms, admitted and done one after the other; the last done, 150ms
// on, closes the window (one that opened at start or, the first, at
// start+1ms).
func boundWindow(t *testing.T, l *Limiter, start int64, served, shedWaits int) {
	t.Helper()
	for range shedWaits {
		if _, err := l.TryAcquireAt(start, Request{Queued: time.Second}); !errors.Is(err, ErrShed) {
			t.Fatalf("waited 1s: %v, want ErrShed", err)
		}
	}
	windows := l.Windows()
	for i := range served {
		tok, err := l.TryAcquireAt(start, Request{Queued: ms})
		if err != nil {
			t.Fatalf("waited 1ms: %v, want admitted", err)
		}
		done := start + int64(ms)
		if i == served-1 {
			done = start + int64(150*ms)
		}
		tok.DoneAt(done, Success)
	}
	if l.Windows() == windows && windows > 0 {
		t.Fatalf("the window at %v did not close", time.Duration(start))
	}
}

func TestDefaultTightensTheQueueBoundWhileItShedsAnOverload(t *testing.T) {
	d, err := NewDefault()
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLimiter(withoutRuntime{d})
	if err != nil {
		t.Fatal(err)
	}
	start := int64(time.Hour)
	// Each window starts where the last one closed (150ms on), so that
	// its samples close it only at its last done.
	next := func() int64 { start += int64(150 * ms); return start }
	boundWindow(t, l, next(), 20, 0) // opens the first window
	boundWindow(t, l, next(), 20, 9) // shed fewer than half the served: a burst
	if got := l.QueueBound(); got != 20*ms {
		t.Fatalf("bound %v after a window that shed 9 for 20 served, want 20ms", got)
	}
	const standing = 2500 * time.Microsecond // a quarter of the target
	boundWindow(t, l, next(), 20, 10)        // half: an overload
	if got := l.QueueBound(); got != standing {
		t.Fatalf("bound %v after a window that shed 10 for 20 served, want a quarter of the target (2.5ms)", got)
	}
	now := next()
	if _, err := l.TryAcquireAt(now, Request{Queued: standing + 1}); !errors.Is(err, ErrShed) {
		t.Fatalf("waited 2.5ms+1ns under the standing bound: %v, want ErrShed", err)
	}
	tok, err := l.TryAcquireAt(now, Request{Queued: time.Second, Priority: 1})
	if err != nil {
		t.Fatalf("CriticalPlus under the standing bound: %v, want admitted", err)
	}
	tok.DoneAt(now+int64(ms), Success)
	boundWindow(t, l, now, 20, 10) // still overloaded: the bound stays
	if got := l.QueueBound(); got != standing {
		t.Fatalf("bound %v in a second window of overload, want 2.5ms", got)
	}
	boundWindow(t, l, next(), 20, 0) // the overload is over
	if got := l.QueueBound(); got != 20*ms {
		t.Fatalf("bound %v after a window that shed nothing, want 20ms again", got)
	}
}

func TestAFewShedByWaitDoNotTightenTheQueueBound(t *testing.T) {
	d, err := NewDefault()
	if err != nil {
		t.Fatal(err)
	}
	// A quiet server: a window of 2 served and 9 shed (a pause, not an
	// overload) keeps the loose bound; 10 of 20 tighten it.
	start := int64(time.Hour)
	for _, c := range []struct {
		served, shed int
		want         time.Duration
	}{{2, 9, 20 * ms}, {20, 10, 2500 * time.Microsecond}, {0, 9, 20 * ms}} {
		d.Update(Window{Start: start, End: start + int64(time.Second), Count: c.served, Shed: c.shed, ShedByWait: c.shed,
			RTT: ms, MinRTT: ms, MeanRTT: ms})
		if got := d.QueueBound(); got != c.want {
			t.Fatalf("bound %v after a window of %d served and %d shed by their wait, want %v", got, c.served, c.shed, c.want)
		}
		start += int64(time.Second)
	}
}

func TestWindowCountsTheShedByWait(t *testing.T) {
	rec := &bounded{fixed: fixed{limit: 100}, bound: 20 * ms}
	l, err := NewLimiter(rec)
	if err != nil {
		t.Fatal(err)
	}
	boundWindow(t, l, int64(time.Hour), 12, 0)
	boundWindow(t, l, int64(time.Hour+150*ms), 12, 7)
	if len(rec.windows) != 2 {
		t.Fatalf("%d windows, want 2", len(rec.windows))
	}
	if w := rec.windows[1]; w.ShedByWait != 7 || w.Shed != 7 || w.Count != 12 {
		t.Fatalf("window shed %d (%d by wait) of %d served, want 7 (7) of 12", w.Shed, w.ShedByWait, w.Count)
	}
	if l.ShedByWait() != 7 {
		t.Fatalf("ShedByWait %d, want 7", l.ShedByWait())
	}
	rec.bound = 3 * ms // read after each Update
	boundWindow(t, l, int64(time.Hour+300*ms), 12, 0)
	if l.QueueBound() != 3*ms {
		t.Fatalf("Limiter's bound %v after the algorithm's moved to 3ms", l.QueueBound())
	}
}

// withoutRuntime is Default without the Go runtime's signals, whose
// scheduling delay is this test process's: its share sheds nothing.
type withoutRuntime struct{ *Default }

func (withoutRuntime) usesRuntime() bool { return false }

// Whatever the waits, priorities and timing, the Limiter sheds for its
// wait exactly a request of Critical or below that waited past the bound
// in force (ErrShed, counted in ShedByWait and in its window's Shed and
// ShedByWait), and nothing else; Default's bound is always 20ms or 2.5ms,
// the tight one exactly after a window that shed past it at least half as
// many as it served and ten or more.
func TestQueueBoundShedsExactlyWhatWaitedPastIt(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d, err := NewDefault()
		if err != nil {
			t.Fatal(err)
		}
		rec := &recordingDefault{withoutRuntime: withoutRuntime{d}}
		l, err := NewLimiter(rec)
		if err != nil {
			t.Fatal(err)
		}
		now, sheds := int64(time.Hour), uint64(0)
		// Phases of 200 requests, one every 0.5ms (a window each), whose
		// waits are drawn up to a phase's most: none past either bound, some
		// past the tight one, a third past the loose one, most past it;
		// each phase once or twice, in a drawn order.
		phases := []time.Duration{2 * ms, 10 * ms, 30 * ms, 100 * ms, 2 * ms, 10 * ms, 30 * ms, 100 * ms}
		phases = rapid.Permutation(phases).Draw(t, "phases")[:rapid.IntRange(4, 8).Draw(t, "phase count")]
		// The waits, priorities and service times, uniform (rapid's own
		// draws favour small values: a phase would rarely shed).
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 0))
		for _, most := range phases {
			for range 200 {
				now += int64(ms / 2)
				r := Request{Queued: time.Duration(rng.Int64N(int64(most) + 1)), Priority: int8(rng.IntN(4) - 2)}
				bound := l.QueueBound()
				if bound != 20*ms && bound != 2500*time.Microsecond {
					t.Fatalf("bound %v", bound)
				}
				tok, err := l.TryAcquireAt(now, r)
				if r.Queued > bound && r.Priority <= 0 {
					if !errors.Is(err, ErrShed) {
						t.Fatalf("%+v past the bound %v: %v, want ErrShed", r, bound, err)
					}
					sheds++
					continue
				}
				if errors.Is(err, ErrShed) {
					t.Fatalf("%+v within the bound %v or above Critical: shed", r, bound)
				}
				if err == nil {
					tok.DoneAt(now+rng.Int64N(int64(20*ms)), Success)
				}
			}
		}
		if l.ShedByWait() != sheds {
			t.Fatalf("ShedByWait %d, want %d", l.ShedByWait(), sheds)
		}
		var inWindows int
		for i, w := range rec.windows {
			if w.ShedByWait > w.Shed {
				t.Fatalf("window %d: %d shed by wait of %d shed", i, w.ShedByWait, w.Shed)
			}
			inWindows += w.ShedByWait
			tight := w.ShedByWait >= 10 && 2*w.ShedByWait >= w.Count
			if want := map[bool]time.Duration{false: 20 * ms, true: 2500 * time.Microsecond}[tight]; rec.bounds[i] != want {
				t.Fatalf("window %d (%d shed by wait, %d served): bound %v after it, want %v", i, w.ShedByWait, w.Count, rec.bounds[i], want)
			}
		}
		if uint64(inWindows) > sheds {
			t.Fatalf("windows counted %d shed by wait, the Limiter %d", inWindows, sheds)
		}
	})
}

// recordingDefault is Default without the runtime's signals that records
// each window and the queue bound after it.
type recordingDefault struct {
	withoutRuntime
	windows []Window
	bounds  []time.Duration
}

func (r *recordingDefault) Update(w Window) int {
	limit := r.withoutRuntime.Update(w)
	r.windows, r.bounds = append(r.windows, w), append(r.bounds, r.QueueBound())
	return limit
}

// bounded is a QueueBounder with a set bound, recording its windows.
type bounded struct {
	fixed
	bound time.Duration
}

func (b *bounded) QueueBound() time.Duration { return b.bound }

func TestQueueBoundFollowsTheSchedulingTarget(t *testing.T) {
	d, err := NewDefault(WithSchedulingTarget(30 * ms))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.QueueBound(); got != 60*ms {
		t.Fatalf("queue bound %v with a 30ms target, want 60ms", got)
	}
	off, err := NewDefault(WithoutSchedulingSignal())
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLimiter(off)
	if err != nil {
		t.Fatal(err)
	}
	if off.QueueBound() != 0 || l.QueueBound() != 0 {
		t.Fatalf("queue bound %v / %v without the scheduling signal", off.QueueBound(), l.QueueBound())
	}
	tok, err := l.TryAcquireAt(int64(time.Hour), Request{Queued: time.Hour})
	if err != nil {
		t.Fatalf("shed without a bound: %v", err)
	}
	tok.DoneAt(int64(time.Hour)+int64(ms), Success)
	// An Algorithm that is no QueueBounder has none either.
	g, err := NewGradient2()
	if err != nil {
		t.Fatal(err)
	}
	if l, err := NewLimiter(g); err != nil || l.QueueBound() != 0 {
		t.Fatalf("Gradient2's Limiter: bound %v, %v", l.QueueBound(), err)
	}
}

// ShedWaited sheds exactly what TryAcquireAt would shed for its wait, and
// counts it alike: in ShedByWait and in the window's Shed and ShedByWait,
// which Default's standing bound reads.
func TestShedWaitedShedsAndCountsAsTryAcquireAt(t *testing.T) {
	rec := &bounded{fixed: fixed{limit: 100}, bound: 20 * ms}
	l, err := NewLimiter(rec)
	if err != nil {
		t.Fatal(err)
	}
	if l.ShedWaited(20*ms) || l.ShedWaited(0) {
		t.Fatal("shed a request that waited no longer than the bound")
	}
	for range 5 {
		if !l.ShedWaited(20*ms + 1) {
			t.Fatal("kept a request that waited past the bound")
		}
	}
	boundWindow(t, l, int64(time.Hour), 12, 2) // and two through TryAcquireAt
	if w := rec.windows[0]; w.ShedByWait != 7 || w.Shed != 7 || w.Count != 12 {
		t.Fatalf("window shed %d (%d by wait) of %d served, want 7 (7) of 12", w.Shed, w.ShedByWait, w.Count)
	}
	if l.ShedByWait() != 7 {
		t.Fatalf("ShedByWait %d, want 7", l.ShedByWait())
	}
	unbounded, _ := newFixed(t, 100)
	if unbounded.ShedWaited(time.Hour) {
		t.Fatal("a Limiter without a queue bound shed a request for its wait")
	}
}
