package redisstore_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
	"github.com/sluicehq/sluice/store/redisstore"
	"github.com/sluicehq/sluice/store/storetest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// deadFallback returns a Fallback whose Redis is down: nothing listens on
// its port (a real refused connection, no mock).
func deadFallback(t *testing.T, opts ...fallback.Option) *redisstore.Fallback {
	t.Helper()
	c := newClient(t, "127.0.0.1:"+strconv.Itoa(storetest.FreePort(t)))
	s, err := redisstore.New(c, redisstore.WithPrefix("dead"))
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]fallback.Option{fallback.WithLogger(quiet), fallback.WithTripAfter(1),
		fallback.WithProbeInterval(20 * time.Millisecond)}, opts...)
	f, err := redisstore.NewFallback(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func TestFallbackOptionsValidate(t *testing.T) {
	c := newClient(t, "127.0.0.1:1")
	s, err := redisstore.New(c)
	if err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]fallback.Option{
		"trip 0":       fallback.WithTripAfter(0),
		"recover 0":    fallback.WithRecoverAfter(0),
		"probe 0":      fallback.WithProbeInterval(0),
		"instances 0":  fallback.WithInstances(0),
		"nil logger":   fallback.WithLogger(nil),
		"unnamed rule": fallback.WithFailClosed(""),
		"memory 0":     fallback.WithInstanceMemory(0),
	} {
		if f, err := redisstore.NewFallback(s, o); err == nil || !strings.HasPrefix(err.Error(), "fallback: ") {
			if f != nil {
				_ = f.Close()
			}
			t.Errorf("%s: %v, want an error", name, err)
		}
	}
	// An instance memory shorter than three heartbeats would drop live
	// instances between their beats.
	if f, err := redisstore.NewFallback(s, fallback.WithLogger(quiet), fallback.WithProbeInterval(time.Second),
		fallback.WithInstanceMemory(2*time.Second)); err == nil || !strings.HasPrefix(err.Error(), "fallback: ") {
		if f != nil {
			_ = f.Close()
		}
		t.Errorf("memory of two probe intervals: %v, want an error", err)
	}
	if _, err := redisstore.NewFallback(nil); err == nil {
		t.Error("NewFallback(nil) succeeded")
	}
}

// TestFallbackLocalShare: with Redis down from the start and a static N
// of 4, every algorithm enforces a quarter of its limit locally.
func TestFallbackLocalShare(t *testing.T) {
	f := deadFallback(t, fallback.WithInstances(4))
	ctx := context.Background()
	specs := []store.Spec{
		{Name: "tb", Algorithm: store.TokenBucket, Limit: 40, Rate: ratelimit.Per(40, time.Hour)},
		{Name: "fw", Algorithm: store.FixedWindow, Limit: 40, Window: time.Hour},
		{Name: "sw", Algorithm: store.SlidingWindow, Limit: 40, Window: time.Hour},
		{Name: "sl", Algorithm: store.SlidingLog, Limit: 40, Window: time.Hour},
		{Name: "cc", Algorithm: store.Concurrency, Limit: 40, LeaseTTL: time.Hour},
	}
	now := int64(time.Hour)
	for _, spec := range specs {
		id := storetest.MustRegister(t, f, spec)
		admitted := 0
		var leases []store.Lease
		for range 40 {
			var req store.Request
			req.Now = now
			req.Add(id, "k", 1)
			var res store.Result
			if err := f.Decide(ctx, &req, &res); err != nil {
				t.Fatalf("%s: %v", spec.Name, err)
			}
			if res.Allowed {
				admitted++
				if l := res.Hits[0].Lease; l.Held() {
					leases = append(leases, l)
				}
			}
		}
		if admitted != 10 {
			t.Errorf("%s: %d admitted locally, want 10 (40 / 4 instances)", spec.Name, admitted)
		}
		for _, l := range leases {
			if err := f.Release(ctx, l, now); err != nil {
				t.Errorf("%s: Release of a local lease: %v", spec.Name, err)
			}
			if err := f.Release(ctx, l, now); !errors.Is(err, store.ErrLeaseNotHeld) {
				t.Errorf("%s: second Release: %v, want ErrLeaseNotHeld", spec.Name, err)
			}
		}
	}
	st := f.Stats()
	if !st.Degraded || st.Instances != 4 || st.Share != 0.25 || st.FallbackDecisions != 200 || st.Trips != 1 {
		t.Errorf("stats: %+v", st)
	}
	// A Redis lease cannot be released while degraded: ErrUnavailable.
	if err := f.Release(ctx, store.Lease{Limit: 5, Key: "k", ID: 7, Cost: 1}, now); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Release of a Redis lease while degraded: %v", err)
	}
}

// TestFallbackFailClosed: a fail-closed limit, and a limit whose share
// rounds to zero, reject while degraded; others still admit.
func TestFallbackFailClosed(t *testing.T) {
	f := deadFallback(t, fallback.WithInstances(3), fallback.WithFailClosed("login"))
	ctx := context.Background()
	api := storetest.MustRegister(t, f, store.Spec{Name: "api", Algorithm: store.FixedWindow, Limit: 30, Window: time.Hour})
	login := storetest.MustRegister(t, f, store.Spec{Name: "login", Algorithm: store.FixedWindow, Limit: 30, Window: time.Hour})
	tiny := storetest.MustRegister(t, f, store.Spec{Name: "tiny", Algorithm: store.TokenBucket, Limit: 2, Rate: ratelimit.Per(2, time.Second)})
	for _, tc := range []struct {
		name    string
		hits    []store.LimitID
		allowed bool
		decider int
	}{
		{"api alone", []store.LimitID{api}, true, 0},
		{"login", []store.LimitID{login}, false, 0},
		{"api then login", []store.LimitID{api, login}, false, 1},
		{"zero share", []store.LimitID{api, tiny}, false, 1},
	} {
		req := store.Request{Now: int64(time.Hour)}
		for _, id := range tc.hits {
			req.Add(id, "k", 1)
		}
		var res store.Result
		if err := f.Decide(ctx, &req, &res); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if res.Allowed != tc.allowed || res.Decider != tc.decider || (!res.Allowed && res.N != tc.decider+1) {
			t.Errorf("%s: allowed %v decider %d N %d, want %v %d", tc.name, res.Allowed, res.Decider, res.N, tc.allowed, tc.decider)
		}
		if d := res.Decision(); !res.Allowed && (d.Reason() != ratelimit.ReasonLimited || d.RetryAfter <= 0) {
			t.Errorf("%s: rejection %+v", tc.name, d)
		}
	}
	// Nothing was charged by the rejected requests: 10 - 1 left for api.
	req := store.Request{Now: int64(time.Hour)}
	req.Add(api, "k", 0)
	var res store.Result
	if err := f.Decide(ctx, &req, &res); err != nil || res.Decision().Remaining != 9 {
		t.Fatalf("api after the rejections: %v %+v", err, res.Decision())
	}
	// Bad input is still an error, not a local decision.
	bad := store.Request{Now: 1}
	bad.Add(99, "k", 1)
	if err := f.Decide(ctx, &bad, &res); err == nil || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("unknown limit: %v", err)
	}
}

// TestFallbackCountsInstances: heartbeats count the instances of one
// prefix; one that closes leaves the count at once. No deadline is tested
// here: the Stores have one that a loaded machine meets (faultTimeout's
// 50ms it may not, and a missed heartbeat counts as a remote error).
func TestFallbackCountsInstances(t *testing.T) {
	srv := startServer(t)
	ins := newInstancesWithin(t, srv.addr(), "count", 3, 2*time.Second)
	if err := ins[2].f.Close(); err != nil {
		t.Fatal(err)
	}
	_ = ins[2].f.Close() // idempotent
	waitFor(t, 3*time.Second, "the others count 2", func() bool {
		return ins[0].f.Stats().Instances == 2 && ins[1].f.Stats().Instances == 2
	})
	if st := ins[0].f.Stats(); st.Degraded || st.RemoteErrors != 0 || st.Share != 0.5 {
		t.Errorf("stats: %+v", st)
	}
}

// TestFallbackUnregisterLocal: while degraded, an unregistered limit is
// unknown to local decisions and releases, and the local store's LimitIDs
// stay those of the Redis store, whether it is built after the Unregister
// or holds the limit already.
func TestFallbackUnregisterLocal(t *testing.T) {
	f := deadFallback(t, fallback.WithInstances(2))
	ctx := context.Background()
	now := int64(time.Hour)
	decide := func(id store.LimitID, cost int64) (store.Result, error) {
		req := store.Request{Now: now}
		req.Add(id, "k", cost)
		var res store.Result
		err := f.Decide(ctx, &req, &res)
		return res, err
	}
	unknown := func(err error, what string) {
		t.Helper()
		if !errors.Is(err, store.ErrUnknownLimit) || errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("%s: %v, want ErrUnknownLimit", what, err)
		}
	}
	a := storetest.MustRegister(t, f, store.Spec{Name: "a", Algorithm: store.FixedWindow, Limit: 10, Window: time.Hour})
	b := storetest.MustRegister(t, f, store.Spec{Name: "b", Algorithm: store.FixedWindow, Limit: 10, Window: time.Hour})
	c := storetest.MustRegister(t, f, store.Spec{Name: "c", Algorithm: store.Concurrency, Limit: 4, LeaseTTL: time.Hour})
	// No local decision yet: the local store is built after this.
	if err := f.Unregister(ctx, b); err != nil {
		t.Fatal(err)
	}
	_, err := decide(b, 1)
	unknown(err, "Decide of an unregistered limit")
	held, err := decide(c, 1)
	if err != nil || !held.Allowed || held.Decision().Limit != 2 || held.Decision().Remaining != 1 || !held.Hits[0].Lease.Held() {
		t.Fatalf("c after b was unregistered: %v %+v, want c's share (2) with 1 left", err, held.Hits[0])
	}
	if res, err := decide(a, 1); err != nil || res.Decision().Limit != 5 {
		t.Fatalf("a: %v %+v, want its share (5)", err, res.Decision())
	}
	// The local store exists now: Register and Unregister reach it too.
	d := storetest.MustRegister(t, f, store.Spec{Name: "d", Algorithm: store.SlidingLog, Limit: 6, Window: time.Hour})
	if res, err := decide(d, 1); err != nil || res.Decision().Limit != 3 {
		t.Fatalf("d: %v %+v, want its share (3)", err, res.Decision())
	}
	if err := f.Unregister(ctx, c); err != nil {
		t.Fatal(err)
	}
	unknown(f.Release(ctx, held.Hits[0].Lease, now), "Release of a local lease of an unregistered limit")
	_, err = decide(c, 1)
	unknown(err, "Decide of a limit unregistered while degraded")
	unknown(f.Unregister(ctx, c), "Unregister again")
	unknown(f.Release(ctx, store.Lease{Limit: c, Key: "k", ID: 7, Cost: 1}, now), "Release of a Redis lease of an unregistered limit")
	again := storetest.MustRegister(t, f, store.Spec{Name: "b", Algorithm: store.FixedWindow, Limit: 8, Window: time.Hour})
	if again <= d {
		t.Fatalf("b registered again as %d: an ID reused", again)
	}
	if res, err := decide(again, 1); err != nil || res.Decision().Limit != 4 {
		t.Fatalf("b again: %v %+v, want its share (4)", err, res.Decision())
	}
}
