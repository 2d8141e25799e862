package adaptive

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"
)

// fixed is an Algorithm that records windows and returns a set limit.
type fixed struct {
	limit   int
	windows []Window
}

func (f *fixed) Limit() int { return f.limit }
func (f *fixed) Update(w Window) int {
	f.windows = append(f.windows, w)
	return f.limit
}

func newFixed(t *testing.T, limit int, opts ...LimiterOption) (*Limiter, *fixed) {
	t.Helper()
	f := &fixed{limit: limit}
	l, err := NewLimiter(f, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l, f
}

func mustQuiet(t *testing.T, l *Limiter) {
	t.Helper()
	if n := l.Inflight(); n != 0 {
		t.Fatalf("%d tokens never reported", n)
	}
}

func TestLimiterAdmitsUpToTheLimit(t *testing.T) {
	l, _ := newFixed(t, 2)
	a, err1 := l.TryAcquireAt(1, Request{})
	b, err2 := l.TryAcquireAt(1, Request{})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if _, err := l.TryAcquireAt(1, Request{}); !errors.Is(err, ErrLimited) {
		t.Fatalf("third admission: %v, want ErrLimited", err)
	}
	a.DoneAt(2, Success)
	b.DoneAt(2, Ignore)
	mustQuiet(t, l)
}

func TestTokenReportedTwicePanics(t *testing.T) {
	l, _ := newFixed(t, 2)
	tok, _ := l.TryAcquireAt(1, Request{})
	tok.DoneAt(2, Success)
	other, _ := l.TryAcquireAt(3, Request{}) // may reuse the pooled state
	for name, f := range map[string]func(){
		"second Done": func() { tok.DoneAt(4, Success) },
		"zero Token":  func() { Token{}.Done(Success) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(r.(string), "adaptive: ") {
					t.Errorf("%s: recovered %v, want an adaptive panic", name, r)
				}
			}()
			f()
		}()
	}
	if l.Inflight() != 1 {
		t.Fatalf("a detected double Done changed inflight to %d", l.Inflight())
	}
	other.DoneAt(5, Success)
	mustQuiet(t, l)
}

func TestWindowAggregates(t *testing.T) {
	l, f := newFixed(t, 100, WithWindow(100*time.Millisecond, time.Second), WithWindowSamples(5, 100),
		WithPercentile(0.5))
	open := int64(time.Second)
	var toks []Token
	for range 10 {
		tk, err := l.TryAcquireAt(open, Request{})
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tk)
	}
	for i, tk := range toks {
		out := Success
		if i == 9 {
			out = Dropped
		}
		tk.DoneAt(open+int64(i+1)*int64(20*time.Millisecond), out)
	}
	mustQuiet(t, l)
	if len(f.windows) != 1 {
		t.Fatalf("%d windows closed, want 1", len(f.windows))
	}
	w := f.windows[0]
	// The first report (20ms) opens the window; the sample at 120ms closes
	// it (100ms old, >= 5 samples) with 6 successes 20..120ms.
	if w.Count != 6 || w.Drops != 0 || w.MaxInflight != 10 {
		t.Fatalf("window %+v", w)
	}
	if w.MinRTT != 20*time.Millisecond || w.MeanRTT != 70*time.Millisecond {
		t.Fatalf("min %v mean %v", w.MinRTT, w.MeanRTT)
	}
	if w.RTT < 56*time.Millisecond || w.RTT > 64*time.Millisecond {
		t.Fatalf("median %v, want 60ms within the histogram's 1/16", w.RTT)
	}
	if l.PredictedLatency() != w.RTT || l.Windows() != 1 {
		t.Fatalf("predicted %v windows %d", l.PredictedLatency(), l.Windows())
	}
}

func TestHistogramPercentiles(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.add(int64(i) * int64(time.Microsecond) * 10)
	}
	for _, p := range []float64{0.01, 0.5, 0.9, 0.99, 1} {
		want := p * 1000 * 10 * float64(time.Microsecond)
		got := h.takePercentile(p)
		if d := float64(got) - want; d > want/16 || d < -want/16 {
			t.Errorf("p%v = %v, want %v within 1/16", p, got, time.Duration(want))
		}
		for i := 1; i <= 1000; i++ {
			h.add(int64(i) * int64(time.Microsecond) * 10)
		}
	}
}

func TestLimiterFollowsTheAlgorithm(t *testing.T) {
	alg, _ := NewAIMD(WithLimits(1, 10), WithInitialLimit(1))
	l, err := NewLimiter(alg, WithWindow(time.Millisecond, time.Millisecond), WithWindowSamples(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	now := int64(time.Second)
	for range 20 {
		tok, err := l.TryAcquireAt(now, Request{})
		if err != nil {
			t.Fatal(err)
		}
		now += int64(2 * time.Millisecond)
		tok.DoneAt(now, Success)
	}
	if l.Limit() <= 1 || l.Limit() != alg.Limit() {
		t.Fatalf("limit %d, algorithm %d", l.Limit(), alg.Limit())
	}
	mustQuiet(t, l)
}

func TestDeadlineAwareAdmission(t *testing.T) {
	l, _ := newFixed(t, 10, WithWindowSamples(1, 1), WithWindow(time.Nanosecond, time.Nanosecond))
	tok, _ := l.TryAcquireAt(1, Request{})
	tok.DoneAt(1, Ignore)
	for range 2 {
		tok, _ := l.TryAcquireAt(100, Request{})
		tok.DoneAt(100+int64(50*time.Millisecond), Success)
	}
	now := int64(time.Second)
	if _, err := l.TryAcquireAt(now, Request{Deadline: now + int64(10*time.Millisecond)}); !errors.Is(err, ErrDeadline) {
		t.Fatalf("10ms deadline against a 50ms service: %v", err)
	}
	tok, err := l.TryAcquireAt(now, Request{Deadline: now + int64(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	tok.DoneAt(now, Ignore)
	mustQuiet(t, l)
}

func TestPressureScalesAClass(t *testing.T) {
	l, _ := newFixed(t, 10)
	if err := l.SetPressure(3, 0.2); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []float64{0, -1, 1.5} {
		if err := l.SetPressure(3, bad); err == nil {
			t.Errorf("pressure %v accepted", bad)
		}
	}
	var toks []Token
	for range 2 {
		tk, err := l.TryAcquireAt(1, Request{Class: 3})
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tk)
	}
	if _, err := l.TryAcquireAt(1, Request{Class: 3}); !errors.Is(err, ErrLimited) {
		t.Fatalf("class 3 over 0.2*10: %v", err)
	}
	tk, err := l.TryAcquireAt(1, Request{})
	if err != nil {
		t.Fatalf("class 0 blocked by class 3's pressure: %v", err)
	}
	toks = append(toks, tk)
	_ = l.SetPressure(3, 1)
	tk, err = l.TryAcquireAt(1, Request{Class: 3})
	if err != nil {
		t.Fatalf("pressure 1 did not lift the bound: %v", err)
	}
	toks = append(toks, tk)
	for _, tk := range toks {
		tk.DoneAt(2, Success)
	}
	mustQuiet(t, l)
}

func TestLimiterOptionValidation(t *testing.T) {
	alg, _ := NewAIMD()
	for i, o := range []LimiterOption{WithWindow(0, time.Second), WithWindow(time.Second, time.Millisecond),
		WithWindowSamples(0, 1), WithWindowSamples(5, 1), WithPercentile(0), WithPercentile(1.1), nil} {
		if _, err := NewLimiter(alg, o); err == nil || (o != nil && !strings.HasPrefix(err.Error(), "adaptive: ")) {
			t.Errorf("option %d: %v", i, err)
		}
	}
	if _, err := NewLimiter(nil); err == nil {
		t.Error("nil algorithm accepted")
	}
}

func TestAcquireBlocksUntilRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newFixed(t, 1)
		held, err := l.Acquire(context.Background(), Request{})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan Token)
		goAcquire(t, l, got)
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("Acquire did not block at the limit")
		default:
		}
		time.Sleep(time.Second)
		held.Done(Success)
		tok := <-got
		tok.Done(Success)
		mustQuiet(t, l)
	})
}

func TestAcquireHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newFixed(t, 1)
		held, _ := l.Acquire(context.Background(), Request{})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := l.Acquire(ctx, Request{}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want DeadlineExceeded", err)
		}
		if l.Waiting() != 0 {
			t.Fatal("a timed-out waiter stayed queued")
		}
		cancelled, cancel2 := context.WithCancel(context.Background())
		cancel2()
		if _, err := l.Acquire(cancelled, Request{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want Canceled", err)
		}
		held.Done(Success)
		mustQuiet(t, l)
	})
}

// Fifty callers wait for three permits: at no time do more than three
// hold a Token. The test counts the holders itself: Limiter.Inflight may
// read above the limit for an instant, the units of an attempt being
// turned away (the semaphore adds them optimistically).
func TestAcquireManyWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newFixed(t, 3)
		var wg sync.WaitGroup
		var holders atomic.Int64
		for i := range 50 {
			wg.Go(func() {
				tok, err := l.Acquire(context.Background(), Request{})
				if err != nil {
					t.Error(err)
					return
				}
				if n := holders.Add(1); n > 3 {
					t.Errorf("%d callers hold a Token at once, over the limit of 3", n)
				}
				time.Sleep(time.Duration(i%7) * time.Millisecond)
				holders.Add(-1)
				tok.Done(Success)
			})
		}
		wg.Wait()
		mustQuiet(t, l)
	})
}

func TestAcquireRejectsHopelessDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newFixed(t, 1, WithWindowSamples(1, 1), WithWindow(time.Nanosecond, time.Nanosecond))
		for range 2 {
			tok, _ := l.Acquire(context.Background(), Request{})
			time.Sleep(100 * time.Millisecond)
			tok.Done(Success)
		}
		held, _ := l.Acquire(context.Background(), Request{})
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		// Service 100ms plus one waiter's wait of 100ms: 150ms is not enough.
		if _, err := l.Acquire(ctx, Request{}); !errors.Is(err, ErrDeadline) {
			t.Fatalf("got %v, want ErrDeadline", err)
		}
		held.Done(Success)
		mustQuiet(t, l)
	})
}

func TestPermitsConserved(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		alg, _ := NewDefault(WithLimits(1, 50), WithInitialLimit(5))
		l, err := NewLimiter(alg, WithWindow(time.Millisecond, 10*time.Millisecond), WithWindowSamples(1, 20))
		if err != nil {
			t.Fatal(err)
		}
		var held []Token
		now := int64(time.Second)
		for range rapid.IntRange(0, 300).Draw(t, "steps") {
			now += rapid.Int64Range(0, int64(5*time.Millisecond)).Draw(t, "dt")
			if len(held) > 0 && rapid.Bool().Draw(t, "done") {
				i := rapid.IntRange(0, len(held)-1).Draw(t, "which")
				held[i].DoneAt(now, Outcome(rapid.IntRange(0, 2).Draw(t, "outcome")))
				held = append(held[:i], held[i+1:]...)
			} else if tok, err := l.TryAcquireAt(now, Request{}); err == nil {
				held = append(held, tok)
			}
			if l.Inflight() != len(held) || l.Limit() < 1 || l.Limit() > 50 {
				t.Fatalf("inflight %d, held %d, limit %d", l.Inflight(), len(held), l.Limit())
			}
		}
		for _, tok := range held {
			tok.DoneAt(now, Success)
		}
		if l.Inflight() != 0 {
			t.Fatalf("inflight %d when quiet", l.Inflight())
		}
	})
}

func TestConcurrentAcquireDone(t *testing.T) {
	alg, _ := NewDefault()
	l, _ := NewLimiter(alg, WithWindowSamples(1, 50), WithWindow(time.Nanosecond, time.Millisecond))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range 2000 {
				if tok, ok := l.TryAcquire(); ok {
					tok.Done(Outcome(i % 3))
				}
			}
		})
	}
	wg.Wait()
	mustQuiet(t, l)
}

func TestOutcomeOf(t *testing.T) {
	for err, want := range map[error]Outcome{
		nil:                      Success,
		context.DeadlineExceeded: Dropped,
		context.Canceled:         Ignore,
		errors.New("boom"):       Success,
	} {
		if got := OutcomeOf(err); got != want {
			t.Errorf("OutcomeOf(%v) = %v, want %v", err, got, want)
		}
	}
}

func TestRuntimeSignalsReachTheAlgorithm(t *testing.T) {
	l, f := newFixed(t, 10, WithRuntimeSignals(), WithWindowSamples(1, 1), WithWindow(time.Nanosecond, time.Nanosecond))
	tok, _ := l.TryAcquireAt(1, Request{})
	tok.DoneAt(2, Success) // opens the window
	for i := range 3 {
		var garbage [][]byte
		for range 1000 {
			garbage = append(garbage, make([]byte, 1024))
		}
		_ = garbage
		runtime.GC()
		tok, _ := l.TryAcquireAt(int64(10+i), Request{})
		tok.DoneAt(int64(20+i), Success)
	}
	if len(f.windows) != 3 {
		t.Fatalf("%d windows", len(f.windows))
	}
	for _, w := range f.windows {
		r := w.Runtime
		if r.GCFraction < 0 || r.GCFraction > 1 || r.SchedLatency < 0 || r.HeapFraction < 0 {
			t.Fatalf("runtime signals out of range: %+v", r)
		}
	}
	var sawGC bool
	for _, w := range f.windows {
		sawGC = sawGC || w.Runtime.GCFraction > 0
	}
	if !sawGC {
		t.Fatal("forced collections left no GC CPU fraction")
	}
	mustQuiet(t, l)
}

func TestRaisedLimitWakesEveryWaiterItCan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, f := newFixed(t, 1, WithWindowSamples(1, 1), WithWindow(time.Nanosecond, time.Nanosecond))
		opener, _ := l.Acquire(context.Background(), Request{})
		opener.Done(Success) // opens the first window
		held, _ := l.Acquire(context.Background(), Request{})
		got := make(chan Token, 3)
		for range 3 {
			goAcquire(t, l, got)
		}
		synctest.Wait()
		f.limit = 4 // the next window raises the limit to 4 ...
		held.Done(Success)
		synctest.Wait() // ... and all three waiters fit without another release
		if len(got) != 3 {
			t.Fatalf("%d of 3 waiters admitted after the limit rose to %d", len(got), l.Limit())
		}
		for range 3 {
			(<-got).Done(Ignore)
		}
		mustQuiet(t, l)
	})
}

// goAcquire acquires from l in a goroutine of its own and sends the token
// on got (the zero Token after an error, which fails t).
func goAcquire(t *testing.T, l *Limiter, got chan<- Token) {
	go func() {
		tok, err := l.Acquire(context.Background(), Request{})
		if err != nil {
			t.Error(err)
		}
		got <- tok
	}()
}
