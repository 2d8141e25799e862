package redisstore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/redisstore"
	"github.com/sluicehq/sluice/store/storetest"
)

func newStore(t testing.TB, c redis.UniversalClient, prefix string, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	opts = append([]redisstore.Option{redisstore.WithPrefix(prefix), redisstore.WithTimeout(2 * time.Second)}, opts...)
	s, err := redisstore.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewValidates(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: sharedAddr()}) // ContextTimeoutEnabled unset
	defer c.Close()
	if _, err := redisstore.New(c); err == nil || !strings.HasPrefix(err.Error(), "redisstore: ") {
		t.Fatalf("New with a client ignoring context deadlines: %v, want an error", err)
	}
	ok := redis.NewClient(&redis.Options{Addr: sharedAddr(), ContextTimeoutEnabled: true})
	defer ok.Close()
	for name, opt := range map[string]redisstore.Option{
		"empty prefix":     redisstore.WithPrefix(""),
		"brace prefix":     redisstore.WithPrefix("a{b"),
		"zero timeout":     redisstore.WithTimeout(0),
		"negative timeout": redisstore.WithTimeout(-time.Second),
	} {
		if _, err := redisstore.New(ok, opt); err == nil || !strings.HasPrefix(err.Error(), "redisstore: ") {
			t.Errorf("%s: New returned %v, want an error", name, err)
		}
	}
	if _, err := redisstore.New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	s, err := redisstore.New(ok)
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []store.Spec{
		{Name: "w", Algorithm: store.FixedWindow, Limit: 5, Window: time.Microsecond + 1},
		{Name: "c", Algorithm: store.Concurrency, Limit: 5, LeaseTTL: time.Second + 1},
	} {
		if _, err := s.Register(context.Background(), spec); err == nil || !strings.HasPrefix(err.Error(), "store: ") {
			t.Errorf("Register(%+v): %v, want a store: error", spec, err)
		}
	}
}

// TestAcrossInstances runs 3 in-process instances, each with a client of
// its own, sending 50 concurrent requests each against one global limit
// of 10: exactly 10 are admitted in total, for every algorithm.
func TestAcrossInstances(t *testing.T) {
	first := sharedClient(t)
	prefix := testPrefix(t, first)
	specs := []store.Spec{
		{Name: "tb", Algorithm: store.TokenBucket, Limit: 10, Rate: ratelimit.Per(10, time.Hour)},
		{Name: "fw", Algorithm: store.FixedWindow, Limit: 10, Window: time.Hour},
		{Name: "sw", Algorithm: store.SlidingWindow, Limit: 10, Window: time.Hour},
		{Name: "sl", Algorithm: store.SlidingLog, Limit: 10, Window: time.Hour},
		{Name: "cc", Algorithm: store.Concurrency, Limit: 10, LeaseTTL: time.Hour},
	}
	const instances, each = 3, 50
	stores := make([]*redisstore.Store, instances)
	ids := make([][]store.LimitID, instances)
	for i := range stores {
		c := first
		if i > 0 {
			c = newClient(t, sharedAddr())
		}
		stores[i] = newStore(t, c, prefix)
		for _, spec := range specs {
			ids[i] = append(ids[i], storetest.MustRegister(t, stores[i], spec))
		}
	}
	for k, spec := range specs {
		var admitted, failed atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range instances {
			for range each {
				wg.Go(func() {
					var req store.Request
					req.Add(ids[i][k], "global", 1)
					var res store.Result
					<-start
					if err := stores[i].Decide(context.Background(), &req, &res); err != nil {
						failed.Add(1)
						return
					}
					if res.Allowed {
						admitted.Add(1)
					}
				})
			}
		}
		close(start)
		wg.Wait()
		if failed.Load() != 0 || admitted.Load() != 10 {
			t.Errorf("%s: %d admitted of %d (%d failed), want exactly 10", spec.Name, admitted.Load(), instances*each, failed.Load())
		}
	}
}

// TestEveryKeyHasTTL checks that no key the store writes lives without a
// TTL, and that window keys live at least two windows.
func TestEveryKeyHasTTL(t *testing.T) {
	c := sharedClient(t)
	prefix := testPrefix(t, c)
	s := newStore(t, c, prefix)
	const w = time.Minute
	specs := []store.Spec{
		{Name: "tb", Algorithm: store.TokenBucket, Limit: 10, Rate: ratelimit.Per(10, w)},
		{Name: "fw", Algorithm: store.FixedWindow, Limit: 10, Window: w},
		{Name: "sw", Algorithm: store.SlidingWindow, Limit: 10, Window: w},
		{Name: "sl", Algorithm: store.SlidingLog, Limit: 10, Window: w},
		{Name: "cc", Algorithm: store.Concurrency, Limit: 10, LeaseTTL: w},
	}
	var req store.Request
	for _, spec := range specs {
		req.Add(storetest.MustRegister(t, s, spec), "k", 1)
	}
	var res store.Result
	if err := s.Decide(context.Background(), &req, &res); err != nil || !res.Allowed {
		t.Fatalf("Decide: %v %+v", err, res)
	}
	lease := res.Hits[4].Lease
	if err := s.Release(context.Background(), lease, 0); err != nil {
		t.Fatalf("Release: %v", err)
	}
	ctx := context.Background()
	keys, err := c.Keys(ctx, "{"+prefix+"}:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 5 {
		t.Fatalf("%d keys under the prefix, want at least 5: %q", len(keys), keys)
	}
	for _, k := range keys {
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= 0 {
			t.Errorf("key %q has no TTL (%v)", k, ttl)
		}
		// Window keys: at least two windows.
		if strings.Contains(k, ":f:") || strings.Contains(k, ":w:") || strings.Contains(k, ":l:") {
			if ttl < 2*w-time.Second {
				t.Errorf("key %q lives %v, want at least %v", k, ttl, 2*w)
			}
		}
	}
}

// TestSameAsMemory replays a random sequence of requests on Redis and, at
// each decision's server time, on a Memory store: the decisions must be
// the same (within the microsecond resolution of Redis's clock, and a
// RetryAfter never earlier than Memory's). Windows divide a second, so both
// stores align them alike.
func TestSameAsMemory(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c, testPrefix(t, c))
	m := store.NewMemory()
	const w = 40 * time.Millisecond
	specs := []store.Spec{
		{Name: "tb", Algorithm: store.TokenBucket, Limit: 4, Rate: ratelimit.Per(3, w)},
		{Name: "fw", Algorithm: store.FixedWindow, Limit: 4, Window: w},
		{Name: "sw", Algorithm: store.SlidingWindow, Limit: 5, Window: w},
		{Name: "cc", Algorithm: store.Concurrency, Limit: 4, LeaseTTL: w},
		{Name: "sl", Algorithm: store.SlidingLog, Limit: 4, Window: w},
	}
	var ids []store.LimitID
	for _, spec := range specs {
		id := storetest.MustRegister(t, s, spec)
		if mid := storetest.MustRegister(t, m, spec); mid != id {
			t.Fatalf("ids differ: %d and %d", id, mid)
		}
		ids = append(ids, id)
	}
	sl := ids[len(ids)-1]
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"a", "b"}
	var redisLeases, memLeases []store.Lease
	var lastNow int64
	deadline := time.Now().Add(3 * time.Second)
	for step := 0; step < 400 && time.Now().Before(deadline); step++ {
		if rng.IntN(20) == 0 {
			time.Sleep(time.Duration(rng.IntN(15)) * time.Millisecond)
		}
		if len(redisLeases) > 0 && rng.IntN(4) == 0 {
			i := rng.IntN(len(redisLeases))
			rerr := s.Release(context.Background(), redisLeases[i], 0)
			// Release reports no time: Memory releases at the last
			// decision's, just before Redis's. A lease Redis held then was
			// held at that earlier time too.
			merr := m.Release(context.Background(), memLeases[i], lastNow)
			if rerr == nil && merr != nil {
				t.Fatalf("step %d: Redis released a lease Memory does not hold: %v", step, merr)
			}
			redisLeases = append(redisLeases[:i], redisLeases[i+1:]...)
			memLeases = append(memLeases[:i], memLeases[i+1:]...)
			if rerr != nil && !errors.Is(rerr, store.ErrLeaseNotHeld) {
				t.Fatal(rerr)
			}
			continue
		}
		// Memory's sliding log refunds the oldest live admission when a
		// later hit rejects (it stays stricter than exact); Redis charges
		// nothing. So a sliding-log hit comes last, where nothing undoes it.
		var req store.Request
		for range 1 + rng.IntN(3) {
			req.Add(ids[rng.IntN(len(ids)-1)], keys[rng.IntN(len(keys))], int64(rng.IntN(4)))
		}
		if rng.IntN(3) == 0 {
			req.Add(sl, keys[rng.IntN(len(keys))], int64(rng.IntN(4)))
		}
		var rr, mr store.Result
		if err := s.Decide(context.Background(), &req, &rr); err != nil {
			t.Fatal(err)
		}
		req.Now = rr.Now
		lastNow = rr.Now
		if err := m.Decide(context.Background(), &req, &mr); err != nil {
			t.Fatal(err)
		}
		if rr.Allowed != mr.Allowed || rr.N != mr.N || rr.Decider != mr.Decider {
			t.Fatalf("step %d %+v at %d: Redis allowed %v N %d decider %d, Memory %v %d %d", step, req.Hits[:req.N], rr.Now,
				rr.Allowed, rr.N, rr.Decider, mr.Allowed, mr.N, mr.Decider)
		}
		for i := range rr.N {
			rd, md := rr.Hits[i].Decision, mr.Hits[i].Decision
			retryOK := rd.RetryAfter == md.RetryAfter ||
				(rd.RetryAfter > md.RetryAfter && rd.RetryAfter-md.RetryAfter < time.Microsecond)
			if rd.Allowed() != md.Allowed() || rd.Reason() != md.Reason() || rd.Limit != md.Limit ||
				rd.Remaining != md.Remaining || rd.ResetAfter != md.ResetAfter || !retryOK {
				t.Fatalf("step %d hit %d (%+v): Redis %+v, Memory %+v", step, i, req.Hits[:req.N], rd, md)
			}
			rl, ml := rr.Hits[i].Lease, mr.Hits[i].Lease
			if rl.Held() != ml.Held() || rl.Expires != ml.Expires || rl.Cost != ml.Cost {
				t.Fatalf("step %d hit %d: leases differ: Redis %+v, Memory %+v", step, i, rl, ml)
			}
			if rl.Held() {
				redisLeases, memLeases = append(redisLeases, rl), append(memLeases, ml)
			}
		}
	}
}

// TestSlidingWindowRetryBound checks the bound the harness cannot check on
// a server clock: a full sliding window admits again within two windows,
// and not before its RetryAfter (checked against Memory at Redis's time in
// TestSameAsMemory).
func TestSlidingWindowRetryBound(t *testing.T) {
	c := sharedClient(t)
	s := newStore(t, c, testPrefix(t, c))
	id := storetest.MustRegister(t, s, store.Spec{Name: "sw", Algorithm: store.SlidingWindow, Limit: 5, Window: time.Hour})
	var req store.Request
	req.Add(id, "k", 1)
	var res store.Result
	for i := range 6 {
		if err := s.Decide(context.Background(), &req, &res); err != nil {
			t.Fatal(err)
		}
		if res.Allowed != (i < 5) {
			t.Fatalf("request %d: allowed %v", i+1, res.Allowed)
		}
	}
	if d := res.Decision(); d.Reason() != ratelimit.ReasonLimited || d.RetryAfter <= 0 || d.RetryAfter > 2*time.Hour || d.Remaining != 0 {
		t.Fatalf("6th request: %+v", d)
	}
}

// TestNilOptionIsAnError: a nil option is a constructor error, not a
// panic.
func TestNilOptionIsAnError(t *testing.T) {
	c := newClient(t, sharedAddr())
	if _, err := redisstore.New(c, nil); err == nil {
		t.Error("New(c, nil): no error")
	}
	s := newStore(t, c, "sluice-test-nil-option")
	if _, err := redisstore.NewFallback(s, nil); err == nil {
		t.Error("NewFallback(s, nil): no error")
	}
}
