package statuspage_test

import (
	"context"
	"errors"
	"math"
	"net/netip"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/penalty"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/statuspage"
)

// fakeClock is a clock that moves only when told, shared by a Controller
// and its Page.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(int64(time.Hour))
	return c
}

func (c *fakeClock) now() int64              { return c.ns.Load() }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// newController returns a Controller on clk with a per-IP token bucket of
// 3 (one more a minute, 64 keys), a global cap of 2 at once, and a penalty
// box of 32 clients that times a client out at its first strike.
func newController(t *testing.T, clk *fakeClock, opts ...shed.Option) *shed.Controller {
	t.Helper()
	box, err := penalty.NewBox(32, penalty.WithStrikes(1, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]shed.Option{shed.WithClock(clk.now), shed.WithPenalties(box, shed.IP)}, opts...)
	c, err := shed.New([]shed.Rule{
		{Name: "per-ip", Identity: shed.IP, Algorithm: shed.TokenBucket, Limit: 3, Rate: ratelimit.Per(1, time.Minute), Capacity: 64},
		{Name: "inflight", Algorithm: shed.Concurrency, Limit: 2},
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// requests sends n attempts from ip through c, each done at once, and
// returns how many were admitted.
func requests(t *testing.T, c *shed.Controller, ip string, n int) int {
	t.Helper()
	admitted := 0
	for range n {
		d, tok, err := c.Decide(context.Background(), shed.Attempt{IP: netip.MustParseAddr(ip)})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted++
			tok.Done(shed.Success)
		}
	}
	return admitted
}

func TestNewRejectsBadInput(t *testing.T) {
	c := newController(t, newFakeClock())
	for name, f := range map[string]func() (*statuspage.Page, error){
		"nil controller": func() (*statuspage.Page, error) { return statuspage.New(nil) },
		"nil option":     func() (*statuspage.Page, error) { return statuspage.New(c, nil) },
		"zero interval":  func() (*statuspage.Page, error) { return statuspage.New(c, statuspage.WithInterval(0)) },
		"negative":       func() (*statuspage.Page, error) { return statuspage.New(c, statuspage.WithInterval(-time.Second)) },
		"history of one": func() (*statuspage.Page, error) { return statuspage.New(c, statuspage.WithHistory(1)) },
		"history too long": func() (*statuspage.Page, error) {
			return statuspage.New(c, statuspage.WithHistory(statuspage.MaxHistory+1))
		},
		"nil clock": func() (*statuspage.Page, error) { return statuspage.New(c, statuspage.WithClock(nil)) },
	} {
		p, err := f()
		if err == nil || p != nil {
			t.Errorf("%s: New returned %v, %v; want an error", name, p, err)
		}
	}
}

func TestRatesAreUnknownUntilTwoSamples(t *testing.T) {
	clk := newFakeClock()
	c := newController(t, clk)
	p := newPage(t, c, clk)
	requests(t, c, "198.51.100.1", 2)
	rep := p.ReportAt(clk.now())
	if rep.Samples != 1 || rep.Rates.Admitted != nil || rep.Rules[0].AllowedRate != nil {
		t.Fatalf("first report: %d samples, admitted rate %v, rule rate %v; want 1 sample and unknown rates",
			rep.Samples, rep.Rates.Admitted, rep.Rules[0].AllowedRate)
	}
	if rep.SpanSeconds != 1 || rep.Rules[1].Chart.Limit != "300.0,2.0" {
		t.Errorf("one sample: span %v s, limit line %q; want an interval, one point at the right edge", rep.SpanSeconds, rep.Rules[1].Chart.Limit)
	}
	if rep.Totals.Admitted != 2 {
		t.Errorf("admitted total %d, want 2", rep.Totals.Admitted)
	}
}

func TestRatesAreTheChangeBetweenTheTwoNewestSamples(t *testing.T) {
	clk := newFakeClock()
	c := newController(t, clk)
	p := newPage(t, c, clk)
	p.SampleAt(clk.now())
	clk.advance(2 * time.Second)
	// 3 admitted, the 4th over the per-IP limit (a strike and a timeout),
	// the 5th and 6th penalized.
	if got := requests(t, c, "198.51.100.1", 6); got != 3 {
		t.Fatalf("admitted %d, want 3", got)
	}
	rep := p.ReportAt(clk.now())
	want := map[string]struct {
		got  *float64
		want float64
	}{
		"admitted":         {rep.Rates.Admitted, 1.5},
		"over limit":       {rep.Rates.OverLimit, 0.5},
		"penalized":        {rep.Rates.Penalized, 1},
		"shedding":         {rep.Rates.Shedding, 0},
		"timeouts":         {rep.Penalty.TimeoutsRate, 0.5},
		"per-ip allowed":   {rep.Rules[0].AllowedRate, 1.5},
		"per-ip rejected":  {rep.Rules[0].RejectedRate, 0.5},
		"inflight allowed": {rep.Rules[1].AllowedRate, 1.5},
	}
	for name, w := range want {
		if w.got == nil || math.Abs(*w.got-w.want) > 1e-9 {
			t.Errorf("%s rate: %v, want %v", name, w.got, w.want)
		}
	}
	if rep.Rates.QueueWaitMeanSeconds != nil {
		t.Errorf("queue wait mean %v with nothing queued, want unknown", *rep.Rates.QueueWaitMeanSeconds)
	}
	if rep.Penalty.Keys != 1 || rep.Penalty.Capacity != 32 || rep.Penalty.Timeouts != 1 {
		t.Errorf("penalty: %+v, want 1 key of 32, 1 timeout", *rep.Penalty)
	}
	if r := rep.Rules[0]; r.Keys != 1 || r.KeyCapacity != 64 || r.Concurrent {
		t.Errorf("per-ip: %d keys of %d, concurrent %v; want 1 of 64, not concurrent", r.Keys, r.KeyCapacity, r.Concurrent)
	}
}

func TestARequestWithinHalfAnIntervalRecordsNoSample(t *testing.T) {
	clk := newFakeClock()
	c := newController(t, clk)
	p := newPage(t, c, clk, statuspage.WithInterval(time.Second))
	p.SampleAt(clk.now())
	clk.advance(499 * time.Millisecond)
	if n := p.ReportAt(clk.now()).Samples; n != 1 {
		t.Errorf("after 499ms: %d samples, want 1", n)
	}
	clk.advance(time.Millisecond)
	if n := p.ReportAt(clk.now()).Samples; n != 2 {
		t.Errorf("after 500ms: %d samples, want 2", n)
	}
	// A time before the newest sample's is no sample, and no rate.
	rep := p.ReportAt(clk.now() - int64(time.Minute))
	if rep.Samples != 2 {
		t.Errorf("a time in the past: %d samples, want 2", rep.Samples)
	}
}

func TestHistoryIsBoundedAndTimedFromTheNewest(t *testing.T) {
	clk := newFakeClock()
	c := newController(t, clk)
	p := newPage(t, c, clk, statuspage.WithHistory(3))
	for range 10 {
		p.SampleAt(clk.now())
		clk.advance(time.Second)
	}
	clk.advance(-time.Second)
	rep := p.ReportAt(clk.now()) // no new sample: the newest is this instant
	if rep.Samples != 3 {
		t.Fatalf("%d samples, want the history's 3", rep.Samples)
	}
	if rep.SpanSeconds != 2 {
		t.Errorf("span %v s, want the 2 s from the oldest sample held to the newest", rep.SpanSeconds)
	}
	h := rep.Rules[1].History
	if len(h) != 3 || h[0].T != -2 || h[1].T != -1 || h[2].T != 0 {
		t.Fatalf("history %+v, want points at -2, -1 and 0 s", h)
	}
	for _, pt := range h {
		if pt.Limit != 2 {
			t.Errorf("point %+v: limit %d, want 2", pt, pt.Limit)
		}
	}
}

func TestChartPlacesTheNewestAtTheRightEdge(t *testing.T) {
	clk := newFakeClock()
	c := newController(t, clk)
	p := newPage(t, c, clk, statuspage.WithHistory(4))
	p.SampleAt(clk.now())
	clk.advance(2 * time.Second)
	d, tok, err := c.Decide(context.Background(), shed.Attempt{IP: netip.MustParseAddr("198.51.100.9")})
	if err != nil || !d.Allowed {
		t.Fatalf("decide: %+v, %v", d, err)
	}
	defer tok.Done(shed.Success)
	rep := p.ReportAt(clk.now())
	ch := rep.Rules[1].Chart
	// Samples 2 s apart span the 300 units: -2 s is x=0, 0 s is x=300.
	// The limit, 2, is the top (y=2, the margin); no permit held is the
	// bottom (y=58), one half way (y=30).
	if rep.SpanSeconds != 2 || ch.Max != 2 || ch.Limit != "0.0,2.0 300.0,2.0" || ch.Inflight != "0.0,58.0 300.0,30.0" {
		t.Errorf("span %v s, chart %+v", rep.SpanSeconds, ch)
	}
	if ch := p.ReportAt(clk.now()).Rules[0].Chart; ch.Inflight != "" {
		t.Errorf("a per-key rule's chart has an inflight line: %q", ch.Inflight)
	}
}

func TestRunSamplesEveryIntervalUntilCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := shed.New([]shed.Rule{{Name: "inflight", Algorithm: shed.Concurrency, Limit: 2}})
		if err != nil {
			t.Fatal(err)
		}
		p, err := statuspage.New(c, statuspage.WithHistory(10))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- p.Run(ctx) }()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		// One sample at the start and one per second; this report's own
		// falls on the last one's instant and is not recorded.
		if n := p.ReportAt(clock.Now()).Samples; n != 6 {
			t.Errorf("after 5 s of Run: %d samples, want 6", n)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	})
}

// A rule that a reload adds has a history and rates of its own, from the
// samples that hold it; the rules kept keep theirs, wherever they move in
// the order.
func TestReloadedRulesHaveTheirOwnHistory(t *testing.T) {
	clk := newFakeClock()
	c := newController(t, clk)
	p := newPage(t, c, clk)
	p.SampleAt(clk.now())
	clk.advance(time.Second)
	p.SampleAt(clk.now())
	err := c.Reload(shed.Config{Rules: []shed.Rule{
		{Name: "wide", Algorithm: shed.Concurrency, Limit: 9},
		{Name: "per-ip", Identity: shed.IP, Algorithm: shed.TokenBucket, Limit: 3, Rate: ratelimit.Per(1, time.Minute), Capacity: 64},
	}})
	if err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Second)
	requests(t, c, "198.51.100.1", 2)
	rep := p.ReportAt(clk.now())
	if len(rep.Rules) != 2 || rep.Rules[0].Name != "wide" {
		t.Fatalf("rules %+v", rep.Rules)
	}
	if h := rep.Rules[1].History; len(h) != 3 {
		t.Errorf("per-ip: %d points, want the 3 samples", len(h))
	}
	if r := rep.Rules[1].AllowedRate; r == nil || *r != 2 {
		t.Errorf("per-ip allowed rate %v, want 2", r)
	}
	w := rep.Rules[0]
	if len(w.History) != 1 || w.History[0].Limit != 9 || w.AllowedRate != nil {
		t.Errorf("wide: history %+v, rate %v; want one point at its limit and no rate yet", w.History, w.AllowedRate)
	}
}

func TestQueueWaitTotalAndMean(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := shed.New([]shed.Rule{{Name: "one", Algorithm: shed.Concurrency, Limit: 1, MaxWait: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		p, err := statuspage.New(c)
		if err != nil {
			t.Fatal(err)
		}
		p.SampleAt(clock.Now())
		_, held, err := c.Decide(context.Background(), shed.Attempt{})
		if err != nil {
			t.Fatal(err)
		}
		waited := make(chan shed.Decision)
		go func() {
			d, tok, err := c.Decide(context.Background(), shed.Attempt{})
			if err == nil && d.Allowed {
				tok.Done(shed.Success)
			}
			waited <- d
		}()
		synctest.Wait() // the second attempt waits in the queue
		if rep := p.ReportAt(clock.Now()); rep.Rules[0].Waiting != 1 {
			t.Fatalf("waiting %d, want 1", rep.Rules[0].Waiting)
		}
		time.Sleep(300 * time.Millisecond)
		held.Done(shed.Success)
		if d := <-waited; !d.Allowed {
			t.Fatalf("the waiting attempt: %+v", d)
		}
		time.Sleep(700 * time.Millisecond)
		rep := p.ReportAt(clock.Now())
		if rep.Totals.QueueWaits != 1 || rep.Totals.QueueWaitSeconds != 0.3 {
			t.Errorf("queue waits %d, total %v s; want 1 of 0.3 s", rep.Totals.QueueWaits, rep.Totals.QueueWaitSeconds)
		}
		if m := rep.Rates.QueueWaitMeanSeconds; m == nil || *m != 0.3 {
			t.Errorf("mean queue wait %v, want 0.3 s", m)
		}
	})
}

// shedByWait returns a Controller of one Adaptive rule of adaptive.Default
// (a queue bound of 20ms) that has shed one attempt for its wait.
func shedByWait(t *testing.T) *shed.Controller {
	t.Helper()
	alg, err := adaptive.NewDefault()
	if err != nil {
		t.Fatal(err)
	}
	lim, err := adaptive.NewLimiter(alg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := shed.New([]shed.Rule{{Name: "endpoint", Algorithm: shed.Adaptive, Limiter: lim}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if d, _, err := c.Decide(context.Background(), shed.Attempt{Queued: time.Second}); err != nil || d.Allowed {
		t.Fatalf("decide after a 1s wait: %+v, %v", d, err)
	}
	return c
}

func TestAdaptiveRuleReportsItsQueueBoundAndWhatItShed(t *testing.T) {
	p, err := statuspage.New(shedByWait(t))
	if err != nil {
		t.Fatal(err)
	}
	r := p.Report().Rules[0]
	if r.ShedByWait != 1 || r.Rejected != 1 || r.QueueBoundSeconds != 0.02 {
		t.Errorf("shed by wait %d of %d rejected, queue bound %v s; want 1 of 1, 0.02 s", r.ShedByWait, r.Rejected, r.QueueBoundSeconds)
	}
}

func TestReportReadsThePagesClock(t *testing.T) {
	clk := newFakeClock()
	p, err := statuspage.New(newController(t, clk), statuspage.WithClock(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	p.Report()
	clk.advance(3 * time.Second)
	rep := p.Report()
	if h := rep.Rules[0].History; rep.Samples != 2 || h[0].T != -3 {
		t.Errorf("%d samples, history %+v; want 2, the first 3 s before the newest", rep.Samples, h)
	}
}

// A reload that replaces a rule (same name, another algorithm) starts its
// counters again: its rate is unknown, never negative or huge, until two
// samples of the new rule exist.
func TestReplacedRuleRateIsUnknownUntilItsSecondSample(t *testing.T) {
	clk := newFakeClock()
	c := newController(t, clk)
	p := newPage(t, c, clk)
	p.SampleAt(clk.now())
	requests(t, c, "198.51.100.1", 2)
	clk.advance(time.Second)
	if r := p.Report().Rules[0].AllowedRate; r == nil || *r != 2 {
		t.Fatalf("per-ip allowed rate %v before the reload, want 2", r)
	}
	err := c.Reload(shed.Config{Rules: []shed.Rule{
		{Name: "per-ip", Identity: shed.IP, Algorithm: shed.FixedWindow, Limit: 3, Window: time.Minute},
	}})
	if err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Second)
	if r := p.Report().Rules[0]; r.Allowed != 0 || r.AllowedRate != nil {
		t.Errorf("replaced per-ip: allowed %d, rate %v; want 0 and unknown", r.Allowed, r.AllowedRate)
	}
	requests(t, c, "198.51.100.1", 1)
	clk.advance(time.Second)
	if r := p.Report().Rules[0].AllowedRate; r == nil || *r != 1 {
		t.Errorf("replaced per-ip allowed rate %v a sample later, want 1", r)
	}
}
