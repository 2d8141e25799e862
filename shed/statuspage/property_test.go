package statuspage_test

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/statuspage"
)

// Whatever the order of samples, requests, held permits and clock steps
// (backwards included), the history stays bounded and in time order,
// samples are at least half an interval apart, rates are never negative,
// and every chart point lies inside the view box.
func TestReportInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clk := newFakeClock()
		limit := rapid.Int64Range(1, 8).Draw(t, "limit")
		c, err := shed.New([]shed.Rule{
			{Name: "per-ip", Identity: shed.IP, Algorithm: shed.FixedWindow, Limit: 5, Window: time.Second},
			{Name: "inflight", Algorithm: shed.Concurrency, Limit: limit},
		}, shed.WithClock(clk.now))
		if err != nil {
			t.Fatal(err)
		}
		history := rapid.IntRange(2, 8).Draw(t, "history")
		interval := time.Duration(rapid.Int64Range(1, 4).Draw(t, "interval")) * 250 * time.Millisecond
		p := newPage(t, c, clk, statuspage.WithHistory(history), statuspage.WithInterval(interval))
		var held []shed.Token
		defer func() {
			for _, tok := range held {
				tok.Done(shed.Success)
			}
		}()
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0:
				clk.advance(time.Duration(rapid.Int64Range(-int64(time.Second), int64(3*time.Second)).Draw(t, "dt")))
			case 1:
				ip := netip.AddrFrom4([4]byte{198, 51, 100, byte(rapid.IntRange(1, 3).Draw(t, "ip"))})
				d, tok, err := c.Decide(context.Background(), shed.Attempt{IP: ip})
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					held = append(held, tok)
				}
			case 2:
				if len(held) > 0 {
					held[0].Done(shed.Success)
					held = held[1:]
				}
			case 3:
				p.SampleAt(clk.now())
			case 4:
				check(t, p.ReportAt(clk.now()), history, interval)
			}
		}
		check(t, p.ReportAt(clk.now()), history, interval)
	})
}

func check(t *rapid.T, rep statuspage.Report, history int, interval time.Duration) {
	if rep.Samples < 1 || rep.Samples > history {
		t.Fatalf("%d samples, history %d", rep.Samples, history)
	}
	// The span is from the oldest sample to the newest, at least an
	// interval.
	if oldest := -rep.Rules[0].History[0].T; rep.SpanSeconds != max(interval.Seconds(), oldest) {
		t.Fatalf("span %v s, oldest sample %v s ago, interval %v", rep.SpanSeconds, oldest, interval)
	}
	for _, r := range []*float64{rep.Rates.Admitted, rep.Rates.OverLimit, rep.Rates.Shedding, rep.Rates.Penalized} {
		if r != nil && *r < 0 {
			t.Fatalf("negative rate %v", *r)
		}
	}
	for _, r := range rep.Rules {
		if len(r.History) != rep.Samples {
			t.Fatalf("%s: %d points of %d samples", r.Name, len(r.History), rep.Samples)
		}
		for i, pt := range r.History {
			if pt.T > 0 || pt.T < -rep.SpanSeconds-1e-9 {
				t.Fatalf("%s: point at %v s outside the span of %v s", r.Name, pt.T, rep.SpanSeconds)
			}
			if i > 0 && pt.T-r.History[i-1].T < interval.Seconds()/2-1e-9 {
				t.Fatalf("%s: points at %v and %v s, closer than half an interval", r.Name, r.History[i-1].T, pt.T)
			}
		}
		if r.History[len(r.History)-1].T != 0 {
			t.Fatalf("%s: the newest point is at %v s, not 0", r.Name, r.History[len(r.History)-1].T)
		}
		for _, rr := range []*float64{r.AllowedRate, r.RejectedRate} {
			if rr != nil && *rr < 0 {
				t.Fatalf("%s: negative rate %v", r.Name, *rr)
			}
		}
		for _, line := range []string{r.Chart.Limit, r.Chart.Inflight} {
			if line == "" {
				continue
			}
			pts := strings.Split(line, " ")
			if len(pts) != len(r.History) {
				t.Fatalf("%s: %d chart points of %d", r.Name, len(pts), len(r.History))
			}
			for _, xy := range pts {
				x, y, _ := strings.Cut(xy, ",")
				fx, errx := strconv.ParseFloat(x, 64)
				fy, erry := strconv.ParseFloat(y, 64)
				if errx != nil || erry != nil || fx < 0 || fx > statuspage.ChartWidth ||
					fy < statuspage.ChartMargin || fy > statuspage.ChartHeight-statuspage.ChartMargin {
					t.Fatalf("%s: chart point %q outside the view box", r.Name, xy)
				}
			}
		}
	}
}
