package redisstore_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/redisstore"
	"github.com/sluicehq/sluice/store/regions"
)

// TestExchangeKeepsEachRegionsLargestCountOfTheLatestWindow: Publish keeps
// per region the largest count of the latest window; Others sums the other
// regions' of the window asked, 0 for another window.
func TestExchangeKeepsEachRegionsLargestCountOfTheLatestWindow(t *testing.T) {
	c := sharedClient(t)
	s, err := redisstore.New(c, redisstore.WithPrefix(testPrefix(t, c)), redisstore.WithTimeout(2*time.Second)) // not the 20ms default: a loaded machine misses it
	if err != nil {
		t.Fatal(err)
	}
	x, ctx := s.Exchange(), context.Background()
	pub := func(region string, window, used int64) {
		t.Helper()
		if err := x.Publish(ctx, region, []regions.Usage{{Limit: "daily", Key: "acme", Window: window, Used: used, TTL: time.Minute}}); err != nil {
			t.Fatal(err)
		}
	}
	others := func(region string, window int64) int64 {
		t.Helper()
		u := []regions.Usage{{Limit: "daily", Key: "acme", Window: window}, {Limit: "daily", Key: "nobody", Window: window}}
		if err := x.Others(ctx, region, u); err != nil {
			t.Fatal(err)
		}
		if u[1].Used != 0 {
			t.Fatalf("a key nobody published: %d", u[1].Used)
		}
		return u[0].Used
	}
	pub("eu", 7, 10)
	pub("eu", 7, 4) // another instance of eu, behind
	pub("us", 7, 5)
	pub("ap", 6, 50) // a window that has passed
	if got := others("eu", 7); got != 5 {
		t.Errorf("eu's others: %d, want 5", got)
	}
	if got := others("us", 7); got != 10 {
		t.Errorf("us's others: %d, want 10 (eu's largest)", got)
	}
	pub("us", 8, 1)
	if got, old := others("eu", 8), others("eu", 7); got != 1 || old != 0 {
		t.Errorf("a new window: others %d, the old window's %d; want 1 and 0", got, old)
	}
}

// regionsLimit is the daily quota of the multi-region tests.
const regionsLimit = 300

// instance is one process of a region: a regions.Store on the region's
// Redis, exchanging through the global Redis.
type regionInstance struct {
	r  *regions.Store
	id store.LimitID
}

// newRegion starts the instances of one region on a private redis-server,
// with the global store at globalAddr.
func newRegion(t *testing.T, name string, n int, globalAddr string, period time.Duration) []regionInstance {
	t.Helper()
	srv := startServer(t)
	var out []regionInstance
	for range n {
		local, err := redisstore.New(newClient(t, srv.addr()), redisstore.WithPrefix("regions"), redisstore.WithTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		global, err := redisstore.New(newClient(t, globalAddr), redisstore.WithPrefix("global"), redisstore.WithTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		r, err := regions.New(name, local, global.Exchange(), regions.WithPeriod(period), regions.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		id, err := r.Register(context.Background(), store.Spec{Name: "daily", Algorithm: store.FixedWindow, Limit: regionsLimit, Window: 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, regionInstance{r: r, id: id})
	}
	return out
}

// flood decides on key from every instance, each every pace, until stop is
// closed, and returns per region the instants of the admissions.
func flood(t *testing.T, byRegion [][]regionInstance, key string, pace time.Duration, stop <-chan struct{}) [][]time.Time {
	t.Helper()
	out := make([][]time.Time, len(byRegion))
	var mu sync.Mutex
	var wg sync.WaitGroup
	var failed atomic.Int64
	for ri, ins := range byRegion {
		for _, in := range ins {
			wg.Go(func() {
				tick := time.NewTicker(pace)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					req := store.Request{Now: time.Now().UnixNano()}
					req.Add(in.id, key, 1)
					var res store.Result
					if err := in.r.Decide(context.Background(), &req, &res); err != nil {
						failed.Add(1)
						continue
					}
					if res.Allowed {
						mu.Lock()
						out[ri] = append(out[ri], time.Now())
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d decisions failed", n)
	}
	for _, ts := range out {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	}
	return out
}

// excessBound is what all regions but one admitted, the most, in any
// interval of length w: the bound's excess over limit − headroom.
func excessBound(admitted [][]time.Time, w time.Duration) int {
	most := make([]int, len(admitted))
	for i, ts := range admitted {
		j := 0
		for k := range ts {
			for ts[k].Sub(ts[j]) > w {
				j++
			}
			most[i] = max(most[i], k-j+1)
		}
	}
	excess := 0
	for q := range most {
		sum := 0
		for s, m := range most {
			if s != q {
				sum += m
			}
		}
		excess = max(excess, sum)
	}
	return excess
}

// TestRegionsOverRedisStayWithinTheBound: two regions, eu with two
// instances on its own redis-server and us with one on another, share a
// daily quota through a third redis-server, the global store, which us
// reaches through a proxy adding 30 ms each way. Flooded from every
// instance, the regions together admit at most limit − headroom + what all
// regions but one admit in one W = P + read delay + the read's latency; and
// once the flood ends and a round has passed, neither admits more.
func TestRegionsOverRedisStayWithinTheBound(t *testing.T) {
	global := startServer(t)
	far := startProxy(t, global.addr(), 30*time.Millisecond)
	const period = 400 * time.Millisecond
	eu := newRegion(t, "eu", 2, global.addr(), period)
	us := newRegion(t, "us", 1, far.addr(), period)
	stop := make(chan struct{})
	time.AfterFunc(3*time.Second, func() { close(stop) })
	admitted := flood(t, [][]regionInstance{eu, us}, "acme", 20*time.Millisecond, stop)
	total := len(admitted[0]) + len(admitted[1])
	// The read's latency through the proxy: a round trip, and slack for
	// a loaded machine.
	w := period + period/4 + 200*time.Millisecond
	headroom := regionsLimit / 10
	bound := regionsLimit - headroom + excessBound(admitted, w)
	t.Logf("regions over Redis: limit %d, admitted %d (eu %d, us %d), bound %d, us's sync lag %v",
		regionsLimit, total, len(admitted[0]), len(admitted[1]), bound, us[0].r.Stats().Lag)
	if total > bound {
		t.Errorf("%d admitted, over the bound %d", total, bound)
	}
	if total < regionsLimit-headroom {
		t.Errorf("%d admitted, fewer than the limit less the headroom, %d", total, regionsLimit-headroom)
	}
	// One more round: every region knows every count.
	for _, ins := range [][]regionInstance{eu, us} {
		for _, in := range ins {
			if err := in.r.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, in := range append(slices.Clone(eu), us...) {
		req := store.Request{Now: time.Now().UnixNano()}
		req.Add(in.id, "acme", 1)
		var res store.Result
		if err := in.r.Decide(context.Background(), &req, &res); err != nil || res.Allowed {
			t.Errorf("after the flood and a round: %v, admitted %v; want a rejection", err, res.Allowed)
		}
	}
}

// TestRegionCutOffFromTheGlobalRedisKeepsItsAllowance: us loses the global
// store (the proxy drops its connections): it keeps enforcing the allowance
// it last learned, and when the link heals its next round converges.
func TestRegionCutOffFromTheGlobalRedisKeepsItsAllowance(t *testing.T) {
	global := startServer(t)
	far := startProxy(t, global.addr(), 10*time.Millisecond)
	eu := newRegion(t, "eu", 1, global.addr(), time.Hour)[0]
	us := newRegion(t, "us", 1, far.addr(), time.Hour)[0]
	ctx := context.Background()
	decideN := func(in regionInstance, n int) int {
		got := 0
		for range n {
			req := store.Request{Now: time.Now().UnixNano()}
			req.Add(in.id, "acme", 1)
			var res store.Result
			if err := in.r.Decide(ctx, &req, &res); err != nil {
				t.Fatal(err)
			}
			if res.Allowed {
				got++
			}
		}
		return got
	}
	decideN(eu, 100)
	decideN(us, 1)
	for _, r := range []*regions.Store{eu.r, us.r, eu.r} {
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	far.partition()
	if err := us.r.Sync(ctx); err == nil || !us.r.Stats().CutOff {
		t.Fatal("a sync through a cut link succeeded")
	}
	allowance := regionsLimit - regionsLimit/10 - 100
	if got := decideN(us, regionsLimit); got != allowance-1 {
		t.Fatalf("cut off, us admitted %d more, want its last allowance less its 1: %d", got, allowance-1)
	}
	far.heal()
	for _, r := range []*regions.Store{us.r, eu.r} {
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if us.r.Stats().CutOff {
		t.Error("us still cut off after the link healed")
	}
	if got := decideN(eu, 10); got != 0 {
		t.Errorf("eu admitted %d after learning us's %d, want 0", got, allowance)
	}
}
