package memcachestore_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memcachestore"
	"github.com/sluicehq/sluice/store/storetest"
)

func newStore(t testing.TB, c *memcache.Client) *memcachestore.Store {
	t.Helper()
	s, err := memcachestore.New(c, memcachestore.WithPrefix("t"+rand.Text()))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func decideAt(t testing.TB, s store.Store, now int64, hits ...store.Hit) *store.Result {
	t.Helper()
	req := store.Request{Now: now}
	for _, h := range hits {
		req.Add(h.Limit, h.Key, h.Cost)
	}
	res := new(store.Result)
	if err := s.Decide(context.Background(), &req, res); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return res
}

func TestRegisterRefusesEveryAlgorithmButFixedWindows(t *testing.T) {
	s, err := memcachestore.New(memcache.New("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []store.Spec{
		{Name: "bucket", Algorithm: store.TokenBucket, Limit: 5, Rate: ratelimit.Per(5, time.Second)},
		{Name: "sliding", Algorithm: store.SlidingWindow, Limit: 5, Window: time.Hour},
		{Name: "log", Algorithm: store.SlidingLog, Limit: 5, Window: time.Hour},
		{Name: "leases", Algorithm: store.Concurrency, Limit: 5, LeaseTTL: time.Minute},
	} {
		_, err := s.Register(context.Background(), spec)
		if err == nil || !strings.HasPrefix(err.Error(), "store: ") || !strings.Contains(err.Error(), "no scripting") || !strings.Contains(err.Error(), "multi-key") {
			t.Errorf("%v: %v, want a store: error saying why (no scripting, no atomic multi-key operation)", spec.Algorithm, err)
		}
	}
	for name, opts := range map[string][]memcachestore.Option{
		"nil":   {nil},
		"empty": {memcachestore.WithPrefix("")},
		"space": {memcachestore.WithPrefix("a b")},
		"long":  {memcachestore.WithPrefix(strings.Repeat("p", 201))},
	} {
		if _, err := memcachestore.New(memcache.New("127.0.0.1:1"), opts...); err == nil || !strings.HasPrefix(err.Error(), "memcachestore: ") {
			t.Errorf("option %s: %v", name, err)
		}
	}
}

// TestDecisionsAsMemoryAtTheSameInstants: any sequence of requests (one to
// three hits over two limits and three keys, random costs, time moving
// forward across window boundaries) gets from Memcached exactly the
// decisions Memory makes at the same instants, for windows of fixed length
// in any zone and for calendar months, with refunds between them.
func TestDecisionsAsMemoryAtTheSameInstants(t *testing.T) {
	srv := startServer(t)
	mc := newStore(t, srv.client())
	ctx := context.Background()
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		m := store.NewMemory()
		var ids, mids [2]store.LimitID
		for i := range 2 {
			s := store.Spec{Name: fmt.Sprintf("l%d-%d", n, i), Algorithm: store.FixedWindow, Limit: rapid.Int64Range(1, 6).Draw(rt, "limit")}
			switch rapid.IntRange(0, 2).Draw(rt, "calendar") {
			case 0:
				s.Window = time.Duration(rapid.IntRange(1, 120).Draw(rt, "window_s")) * time.Second
			case 1:
				s.Window = 24 * time.Hour
				s.Calendar.Offset = time.Duration(rapid.IntRange(-14*60, 14*60).Draw(rt, "offset_min")) * time.Minute
			default:
				s.Calendar.Months = rapid.IntRange(1, 12).Draw(rt, "months")
			}
			ids[i], mids[i] = storetest.MustRegister(t, mc, s), storetest.MustRegister(t, m, s)
		}
		// A start anywhere in 2020-2040, then forward steps of up to a day.
		now := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano() + rapid.Int64Range(0, int64(20*365*24*time.Hour)).Draw(rt, "start")
		keys := []string{"a", "b", "c d\n"}
		for step := range 20 {
			now += rapid.Int64Range(0, int64(24*time.Hour)).Draw(rt, "step")
			req, mreq := store.Request{Now: now}, store.Request{Now: now}
			for range rapid.IntRange(1, 3).Draw(rt, "hits") {
				i := rapid.IntRange(0, 1).Draw(rt, "limit_index")
				k := keys[rapid.IntRange(0, 2).Draw(rt, "key")]
				cost := rapid.Int64Range(0, 7).Draw(rt, "cost")
				req.Add(ids[i], k, cost)
				mreq.Add(mids[i], k, cost)
			}
			var res, mres store.Result
			if err := mc.Decide(ctx, &req, &res); err != nil {
				rt.Fatal(err)
			}
			if err := m.Decide(ctx, &mreq, &mres); err != nil {
				rt.Fatal(err)
			}
			if res.Allowed != mres.Allowed || res.N != mres.N || res.Decider != mres.Decider || res.Now != mres.Now || res.Hits != mres.Hits {
				rt.Fatalf("step %d at %v:\nMemcached %+v\nMemory    %+v", step, time.Unix(0, now).UTC(), res, mres)
			}
			// Now and then an admitted request is refunded, on both.
			if res.Allowed && rapid.Bool().Draw(rt, "refund") {
				if err := mc.Refund(ctx, &req, &res); err != nil {
					rt.Fatal(err)
				}
				if err := m.Refund(ctx, &mreq, &mres); err != nil {
					rt.Fatal(err)
				}
			}
		}
	})
	if st := mc.Stats(); st.Evictions != 0 {
		t.Fatalf("evictions counted where none happened: %+v", st)
	}
}

// TestMultiRuleRacesNeverOverAdmit: 8 callers race 400 requests, each
// naming a shared quota of 40 first and its caller's own limit of 5
// second (8 x 5 = 40: the two bind together), so that most are rejected by
// the second rule after the first counted them. The stated bound holds: the shared quota admits at most
// its limit (over-admission 0), every charge of a rejected request is
// given back (the counter ends equal to what was admitted, nothing failed),
// and the under-admission that the in-flight charges cause is reported.
func TestMultiRuleRacesNeverOverAdmit(t *testing.T) {
	srv := startServer(t)
	s := newStore(t, srv.client())
	const sharedLimit, ownLimit, callers, each = 40, 5, 8, 50
	shared := storetest.MustRegister(t, s, store.Spec{Name: "shared", Algorithm: store.FixedWindow, Limit: sharedLimit, Window: time.Hour})
	own := storetest.MustRegister(t, s, store.Spec{Name: "own", Algorithm: store.FixedWindow, Limit: ownLimit, Window: time.Hour})
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	var (
		wg              sync.WaitGroup
		mu              sync.Mutex
		admitted        int
		rejectedByFirst int
	)
	for c := range callers {
		wg.Go(func() {
			for range each {
				req := store.Request{Now: now}
				req.Add(shared, "tenant", 1)
				req.Add(own, fmt.Sprint("caller", c), 1)
				var res store.Result
				if err := s.Decide(context.Background(), &req, &res); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if res.Allowed {
					admitted++
				} else if res.Decider == 0 {
					rejectedByFirst++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if admitted > sharedLimit {
		t.Fatalf("admitted %d over a shared limit of %d", admitted, sharedLimit)
	}
	d := decideAt(t, s, now, store.Hit{Limit: shared, Key: "tenant"}).Decision()
	if used := sharedLimit - d.Remaining; used != int64(admitted) {
		t.Fatalf("the shared counter holds %d, but %d were admitted: a give-back was lost", used, admitted)
	}
	st := s.Stats()
	if st.GiveBackFailed != 0 || st.GivenBack != st.UndoneHits || st.Evictions != 0 {
		t.Fatalf("give-backs (every one made, no eviction taken for one): %+v", st)
	}
	t.Logf("admitted %d of %d (shared limit %d; own limits %d x %d); %d rejected by the shared quota (full, or seeing in-flight charges); %d hits given back",
		admitted, callers*each, sharedLimit, callers, ownLimit, rejectedByFirst, st.GivenBack)
}

// TestEvictionIsDetectedAndCounted: a window's counter that vanishes
// within its window (here deleted, as memcached's LRU would evict it) is
// made anew by the next request, which finds the window's marker and
// counts an eviction; the reset limit admits again, as the docs warn. A
// Reset is not taken for an eviction.
func TestEvictionIsDetectedAndCounted(t *testing.T) {
	srv := startServer(t)
	c := srv.client()
	s := newStore(t, c)
	id := storetest.MustRegister(t, s, store.Spec{Name: "daily", Algorithm: store.FixedWindow, Limit: 2, Window: 24 * time.Hour})
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	hit := store.Hit{Limit: id, Key: "tenant", Cost: 1}
	for range 2 {
		decideAt(t, s, now, hit)
	}
	if decideAt(t, s, now, hit).Allowed || s.Stats().Evictions != 0 {
		t.Fatalf("over the limit before an eviction: admitted, or %+v", s.Stats())
	}
	if err := c.Delete(s.CounterKey(id, "tenant", now)); err != nil {
		t.Fatal(err)
	}
	if !decideAt(t, s, now, hit).Allowed {
		t.Fatal("after the counter was evicted: rejected (the count should have been lost)")
	}
	if st := s.Stats(); st.Evictions != 1 {
		t.Fatalf("eviction not counted: %+v", st)
	}
	if err := s.ResetAt(context.Background(), id, "tenant", now); err != nil {
		t.Fatal(err)
	}
	decideAt(t, s, now, hit)
	if st := s.Stats(); st.Evictions != 1 {
		t.Fatalf("a Reset was counted as an eviction: %+v", st)
	}
}

// TestRealEvictionUnderMemoryPressure fills a 2 MiB memcached far past its
// memory with items the size of counters (memcached evicts within a slab
// class) while counters are in use, and reports how many counters were
// evicted and how many of those evictions the markers caught: detection is
// a lower bound (an eviction that took the marker too goes unseen), and the
// test checks that whatever is counted is real.
func TestRealEvictionUnderMemoryPressure(t *testing.T) {
	srv := startServer(t, "-m", "2", "-I", "128k", "-o", "slab_chunk_max=65536")
	c := srv.client()
	s := newStore(t, c)
	const keys, junk = 200, 40000
	const limit = 1 << 20
	id := storetest.MustRegister(t, s, store.Spec{Name: "daily", Algorithm: store.FixedWindow, Limit: limit, Window: 24 * time.Hour})
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	round := func() (kept int) {
		for k := range keys {
			if d := decideAt(t, s, now, store.Hit{Limit: id, Key: fmt.Sprint("k", k), Cost: 1}).Decision(); d.Remaining < limit-1 {
				kept++
			}
		}
		return kept
	}
	round()
	// The junk, pipelined on one connection with noreply: keys of 25 to 84
	// bytes, around the sizes of a counter's and a marker's.
	conn, err := net.Dial("tcp", srv.addr())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for i := range junk {
		fmt.Fprintf(&buf, "set junk:%0*d 0 0 1 noreply\r\n1\r\n", 20+i%60, i)
	}
	buf.WriteString("version\r\n")
	if _, err := conn.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil { // the version line: all sets done
		t.Fatal(err)
	}
	_ = conn.Close()
	kept := round() // a counter that kept its count is past 1 now
	evicted := keys - kept
	st := s.Stats()
	t.Logf("2 MiB memcached, %d counters, %d items of their size written over them: %d counters evicted, %d evictions detected", keys, junk, evicted, st.Evictions)
	if evicted == 0 {
		t.Fatal("no counter was evicted: the test did not create memory pressure")
	}
	if st.Evictions > uint64(evicted) {
		t.Fatalf("%d evictions counted, but only %d counters lost their count", st.Evictions, evicted)
	}
}

// faultSlack is the margin over the deadline a call on a paused server may
// take on a loaded machine under -race; it bounds a hung call (or one round
// trip per hit), not performance.
const faultSlack = 400 * time.Millisecond

// faultTries is how many times a paused-server test runs its scenario, the
// deadline doubled each time, before a try that could not show the case
// (the machine too slow for the deadline) fails it.
const faultTries = 4

// TestPausedServerIsUnavailableWithinTheDeadline: a paused memcached
// (SIGSTOP) fails a decision with ErrUnavailable within the client's
// deadline per round trip (100ms), a request of many hits included.
//
// A loaded machine may miss 100ms on the live server too, or take longer
// than the slack to give up: such a try is run again with twice the
// deadline.
func TestPausedServerIsUnavailableWithinTheDeadline(t *testing.T) {
	srv := startServer(t)
	storetest.RetryDoubling(t, faultTries, 100*time.Millisecond, func(_ int, timeout time.Duration) string {
		return pausedIsUnavailable(t, srv, timeout)
	})
}

// pausedIsUnavailable is one try of
// TestPausedServerIsUnavailableWithinTheDeadline with the given deadline,
// leaving srv running. It fails t where the store is wrong and returns why
// when the machine was too slow for the try to show the case (the empty
// string when it showed it).
func pausedIsUnavailable(t *testing.T, srv *server, timeout time.Duration) string {
	t.Helper()
	s := newStore(t, srv.clientWithin(timeout))
	id := storetest.MustRegister(t, s, store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 10, Window: time.Hour})
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	live := store.Request{Now: now}
	live.Add(id, "k", 1)
	if err := s.Decide(context.Background(), &live, new(store.Result)); err != nil {
		return fmt.Sprintf("a decision on the live server failed: %v", err)
	}
	srv.Pause()
	defer srv.Resume()
	req := store.Request{Now: now}
	req.Add(id, "k", 1)
	start := time.Now()
	err := s.Decide(context.Background(), &req, new(store.Result))
	took := time.Since(start)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("paused server: %v after %v, want ErrUnavailable", err, took)
	}
	if took > timeout+faultSlack {
		return fmt.Sprintf("paused server: ErrUnavailable after %v, past the deadline and %v of slack", took, faultSlack)
	}
	// A request of 8 hits costs one deadline too, not one per hit: the
	// store makes no give-back round trips to a server that failed.
	var wide store.Request
	wide.Now = now
	for k := range store.MaxHits {
		wide.Add(id, fmt.Sprint("k", k), 1)
	}
	start = time.Now()
	err = s.Decide(context.Background(), &wide, new(store.Result))
	took = time.Since(start)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("paused server, 8 hits: %v after %v, want ErrUnavailable", err, took)
	}
	if took > timeout+faultSlack {
		return fmt.Sprintf("paused server, 8 hits: ErrUnavailable after %v, past the deadline and %v of slack", took, faultSlack)
	}
	return ""
}
