package fallback_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
	"github.com/sluicehq/sluice/store/storetest"
)

var (
	quiet  = slog.New(slog.NewTextHandler(io.Discard, nil))
	outage = store.Unavailable(errors.New("connection refused"))
)

// members is a Membership that counts n instances, or fails with the
// remote's error; it records its Leave.
type members struct {
	remote *storetest.Faulty
	n      atomic.Int64
	left   atomic.Int64
}

func (m *members) Beat(context.Context, time.Duration) (int64, error) {
	if err := m.remote.Decide(context.Background(), nil, nil); errors.Is(err, store.ErrUnavailable) {
		return 0, err
	}
	return m.n.Load(), nil
}

func (m *members) Leave(context.Context) error { m.left.Add(1); return nil }

// newFallback returns a Store around a Faulty Memory (down when down is
// set) counted by a members of n.
func newFallback(t *testing.T, n int64, down bool, opts ...fallback.Option) (*fallback.Store, *storetest.Faulty, *members) {
	t.Helper()
	remote := storetest.NewFaulty(store.NewMemory())
	if down {
		remote.SetErr(outage)
	}
	m := &members{remote: remote}
	m.n.Store(n)
	opts = append([]fallback.Option{fallback.WithLogger(quiet), fallback.WithTripAfter(1), fallback.WithProbeInterval(time.Hour)}, opts...)
	f, err := fallback.New(remote, m, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f, remote, m
}

// register registers spec on f, whose remote answers.
func register(t *testing.T, f *fallback.Store, remote *storetest.Faulty, spec store.Spec) store.LimitID {
	t.Helper()
	id, err := f.Register(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func admitted(t *testing.T, f *fallback.Store, id store.LimitID, key string, n int) int {
	t.Helper()
	got := 0
	for range n {
		req := store.Request{Now: int64(time.Hour)}
		req.Add(id, key, 1)
		var res store.Result
		if err := f.Decide(context.Background(), &req, &res); err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			got++
		}
	}
	return got
}

// TestConformanceOnAHealthyRemote: while the remote answers, a Store is
// the remote store, to the conformance harness.
func TestConformanceOnAHealthyRemote(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		f, _, _ := newFallback(t, 1, false)
		return f
	})
}

// TestLocalShareIsTheLimitOverTheInstancesCounted: with the remote down,
// each limit is divided by the N its Membership counted last.
func TestLocalShareIsTheLimitOverTheInstancesCounted(t *testing.T) {
	for _, spec := range []store.Spec{
		{Name: "fixed", Algorithm: store.FixedWindow, Limit: 40, Window: time.Hour},
		{Name: "bucket", Algorithm: store.TokenBucket, Limit: 40, Rate: ratelimit.Rate{Count: 40, Per: time.Hour}},
	} {
		f, remote, _ := newFallback(t, 4, false)
		id := register(t, f, remote, spec)
		remote.SetErr(outage)
		if got := admitted(t, f, id, "k", 100); got != 10 {
			t.Errorf("%s: %d admitted locally, want 10 (40 / 4 instances)", spec.Name, got)
		}
		if st := f.Stats(); !st.Degraded || st.Instances != 4 || st.Share != 0.25 || st.Trips != 1 || st.FallbackDecisions != 100 {
			t.Errorf("%s: stats %+v", spec.Name, st)
		}
	}
}

// TestFailClosedAndZeroShareReject: while degraded, a fail-closed limit
// and a limit whose share rounds to zero reject, charging nothing before.
func TestFailClosedAndZeroShareReject(t *testing.T) {
	f, remote, _ := newFallback(t, 3, false, fallback.WithFailClosed("login"))
	login := register(t, f, remote, store.Spec{Name: "login", Algorithm: store.FixedWindow, Limit: 30, Window: time.Hour})
	tiny := register(t, f, remote, store.Spec{Name: "tiny", Algorithm: store.FixedWindow, Limit: 2, Window: time.Hour})
	api := register(t, f, remote, store.Spec{Name: "api", Algorithm: store.FixedWindow, Limit: 3, Window: time.Hour})
	remote.SetErr(outage)
	for _, id := range []store.LimitID{login, tiny} {
		if got := admitted(t, f, id, "k", 5); got != 0 {
			t.Errorf("limit %d: %d admitted while degraded, want 0", id, got)
		}
		req := store.Request{Now: int64(time.Hour)}
		req.Add(api, "k", 1)
		req.Add(id, "k", 1)
		var res store.Result
		if err := f.Decide(context.Background(), &req, &res); err != nil || res.Allowed || res.Decider != 1 {
			t.Errorf("limit %d after api: %v %+v, want a rejection by hit 1", id, err, res)
		}
	}
	if got := admitted(t, f, api, "k", 5); got != 1 {
		t.Errorf("api: %d admitted, want 1 (3 / 3; the rejected requests charged nothing)", got)
	}
}

// checking is a remote that refuses requests of more than one hit.
type checking struct{ *storetest.Faulty }

func (checking) CheckRequest(req *store.Request) error {
	if req.N > 1 {
		return errors.New("checking: one hit a request")
	}
	return nil
}

// TestRequestCheckerRefusesLocallyToo: a request the remote would refuse
// for its shape is refused while degraded as well.
func TestRequestCheckerRefusesLocallyToo(t *testing.T) {
	inner := storetest.NewFaulty(store.NewMemory())
	f, err := fallback.New(checking{inner}, &members{remote: inner}, fallback.WithLogger(quiet), fallback.WithTripAfter(1))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id, err := f.Register(context.Background(), store.Spec{Name: "a", Algorithm: store.FixedWindow, Limit: 3, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	inner.SetErr(outage)
	req := store.Request{Now: 1}
	req.Add(id, "x", 1)
	req.Add(id, "y", 1)
	var res store.Result
	if err := f.Decide(context.Background(), &req, &res); err == nil || !strings.HasPrefix(err.Error(), "checking: ") {
		t.Errorf("two hits while degraded: %v, want the checker's error", err)
	}
}

// TestBreakerClosesAfterRecoverAfterProbes: the heartbeat goroutine probes
// every interval; the breaker closes after WithRecoverAfter good probes,
// and decisions go to the remote again. Close leaves the Membership once
// and stops the goroutine.
func TestBreakerClosesAfterRecoverAfterProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		remote := storetest.NewFaulty(store.NewMemory())
		m := &members{remote: remote}
		m.n.Store(2)
		f, err := fallback.New(remote, m, fallback.WithLogger(quiet), fallback.WithTripAfter(1),
			fallback.WithRecoverAfter(3), fallback.WithProbeInterval(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		id := register(t, f, remote, store.Spec{Name: "a", Algorithm: store.FixedWindow, Limit: 10, Window: time.Hour})
		remote.SetErr(outage)
		if got := admitted(t, f, id, "k", 10); got != 5 || !f.Health().Degraded {
			t.Fatalf("%d admitted, degraded %v; want 5 (10 / 2), degraded", got, f.Health().Degraded)
		}
		remote.SetErr(nil)
		<-time.After(2*time.Second + time.Millisecond)
		synctest.Wait()
		if !f.Stats().Degraded {
			t.Fatal("closed after two good probes, want three")
		}
		<-time.After(time.Second)
		synctest.Wait()
		if st := f.Stats(); st.Degraded || st.Recoveries != 1 {
			t.Fatalf("after three good probes: %+v, want closed", st)
		}
		before := f.Stats().FallbackDecisions
		if got := admitted(t, f, id, "k", 20); got != 10 || f.Stats().FallbackDecisions != before {
			t.Errorf("on the remote again: %d admitted (want the remote's 10), local decisions %d -> %d", got, before, f.Stats().FallbackDecisions)
		}
		_ = f.Close()
		_ = f.Close()
		if n := m.left.Load(); n != 1 {
			t.Errorf("Close left the membership %d times, want once", n)
		}
	})
}

func TestNewValidates(t *testing.T) {
	remote := storetest.NewFaulty(store.NewMemory())
	m := &members{remote: remote}
	for name, o := range map[string]fallback.Option{
		"trip 0":       fallback.WithTripAfter(0),
		"recover 0":    fallback.WithRecoverAfter(0),
		"probe 0":      fallback.WithProbeInterval(0),
		"instances 0":  fallback.WithInstances(0),
		"nil logger":   fallback.WithLogger(nil),
		"unnamed rule": fallback.WithFailClosed(""),
		"memory 0":     fallback.WithInstanceMemory(0),
		"no backend":   fallback.WithBackendName(""),
		"short memory": fallback.WithInstanceMemory(2 * fallback.DefaultProbeInterval),
		"nil option":   nil,
	} {
		if f, err := fallback.New(remote, m, o); err == nil || !strings.HasPrefix(err.Error(), "fallback: ") {
			if f != nil {
				_ = f.Close()
			}
			t.Errorf("%s: %v, want an error starting with fallback: ", name, err)
		}
	}
	if _, err := fallback.New(nil, m); err == nil {
		t.Error("New(nil, m) succeeded")
	}
	if _, err := fallback.New(remote, nil); err == nil {
		t.Error("New(remote, nil) succeeded")
	}
}
