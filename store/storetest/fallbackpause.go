package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// FallbackPause is one try of a network store's fallback fault test:
// Fallback (a fallback.Store, read through its Health), whose breaker trips after one failed call and recovers after
// one probe, decides one hit of cost 1 on the key "tenant" of Limit (a
// fresh limit of 10 per window longer than the test) on the live server;
// Pause stops the server; 20 decisions follow on the local share, each
// within Timeout (the store's deadline) plus Slack, Share of them
// admitted; Resume restarts it; within 10s the breaker closes, and the
// next decision is the server's again (admitted: it counted 1 of 10).
// Backend names the server in failures.
type FallbackPause struct {
	Fallback interface {
		store.Store
		store.HealthReporter
	}
	Limit          store.LimitID
	Backend        string
	Share          int
	Timeout, Slack time.Duration
	Pause, Resume  func()
}

// Try runs the scenario. It fails t where the Fallback is wrong (not
// degraded by the pause, other than 20 local decisions or Share
// admitted, rejected or not recovered once after it) and returns why the
// machine was too slow for the try to show the case, or "" when it
// showed it, for RetryDoubling. It blocks for the scenario, polling
// Health every 5ms.
func (p FallbackPause) Try(t testing.TB) string {
	t.Helper()
	f := p.Fallback
	decide := func() (bool, time.Duration) {
		t.Helper()
		req := store.Request{Now: time.Now().UnixNano()}
		req.Add(p.Limit, "tenant", 1)
		var res store.Result
		start := time.Now()
		if err := f.Decide(context.Background(), &req, &res); err != nil {
			t.Fatalf("a fallback's Decide failed: %v", err)
		}
		return res.Allowed, time.Since(start)
	}
	if ok, _ := decide(); !ok || f.Health().Degraded {
		return fmt.Sprintf("on the live server: admitted %v, %+v", ok, f.Health())
	}
	before := f.Health()
	p.Pause()
	admitted := 0
	for range 20 {
		ok, took := decide()
		if took > p.Timeout+p.Slack {
			p.Resume()
			return fmt.Sprintf("a decision took %v on a paused server, past the deadline and %v of slack", took, p.Slack)
		}
		if ok {
			admitted++
		}
	}
	st := f.Health()
	p.Resume()
	// A trip and a recovery of the live server's just before the pause (a
	// heartbeat that missed the deadline) make one more.
	trips, local := st.Trips-before.Trips, st.FallbackDecisions-before.FallbackDecisions
	if !st.Degraded || trips < 1 || local != 20 {
		t.Fatalf("after 20 decisions on a paused server: %+v, was %+v: want degraded, a trip, 20 local decisions", st, before)
	}
	if trips > 1 {
		return fmt.Sprintf("%d trips around the pause, the live server's deadline missed: %+v", trips, st)
	}
	if admitted != p.Share {
		t.Fatalf("admitted %d locally, want %d (the share of a limit of 10)", admitted, p.Share)
	}
	for deadline := time.Now().Add(10 * time.Second); f.Health().Degraded; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Sprintf("waited 10s for the breaker to close once the server resumed: %+v", f.Health())
		}
	}
	ok, _ := decide()
	if after := f.Health(); after.Degraded || after.FallbackDecisions != st.FallbackDecisions {
		return fmt.Sprintf("after recovery the breaker tripped again, the live server's deadline missed: %+v", after)
	}
	if !ok {
		t.Fatalf("after recovery: rejected on %s, which counted 1 of 10", p.Backend)
	}
	if d := f.Health(); d.Recoveries-before.Recoveries != 1 {
		t.Fatalf("after recovery: %+v, was %+v", d, before)
	}
	return ""
}
