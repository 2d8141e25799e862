package regions_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/regions"
)

var quiet = slog.New(slog.DiscardHandler)

// daily is the global quota of the tests.
var daily = store.Spec{Name: "daily", Algorithm: store.FixedWindow, Limit: 100, Window: 24 * time.Hour}

// flaky is an Exchange that fails while down is set.
type flaky struct {
	regions.Exchange
	down atomic.Bool
}

var errCut = errors.New("connection refused")

func (f *flaky) Publish(ctx context.Context, region string, u []regions.Usage) error {
	if f.down.Load() {
		return errCut
	}
	return f.Exchange.Publish(ctx, region, u)
}

func (f *flaky) Others(ctx context.Context, region string, u []regions.Usage) error {
	if f.down.Load() {
		return errCut
	}
	return f.Exchange.Others(ctx, region, u)
}

// region returns the Store of region name on a Memory of its own, with a
// period so long that only Sync exchanges usage.
func region(t *testing.T, name string, x regions.Exchange, opts ...regions.Option) *regions.Store {
	t.Helper()
	s, err := regions.New(name, store.NewMemory(), x, append([]regions.Option{regions.WithPeriod(24 * time.Hour), regions.WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func register(t *testing.T, s store.Store, spec store.Spec) store.LimitID {
	t.Helper()
	id, err := s.Register(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// admit decides n requests of cost 1 on key at now and returns how many
// were admitted.
func admit(t *testing.T, s store.Store, id store.LimitID, key string, n int, now int64) int {
	t.Helper()
	got := 0
	for range n {
		req := store.Request{Now: now}
		req.Add(id, key, 1)
		var res store.Result
		if err := s.Decide(context.Background(), &req, &res); err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			got++
		}
	}
	return got
}

func syncAll(t *testing.T, ss ...*regions.Store) {
	t.Helper()
	for _, s := range ss {
		if err := s.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// now is an instant inside today's window.
func now() int64 { return time.Now().UnixNano() }

// TestAllowanceIsLimitMinusHeadroomMinusOthers: with the others' usage
// known, a region admits the limit less the headroom less what the others
// used, and no more.
func TestAllowanceIsLimitMinusHeadroomMinusOthers(t *testing.T) {
	x := new(regions.MemoryExchange)
	a, b := region(t, "eu", x), region(t, "us", x)
	ida, idb := register(t, a, daily), register(t, b, daily)
	if got := admit(t, a, ida, "acme", 30, now()); got != 30 {
		t.Fatalf("eu admitted %d of 30", got)
	}
	// A key a region has not met yet has no view of the others until the
	// next round (the bound counts that round's traffic).
	admit(t, b, idb, "acme", 1, now())
	syncAll(t, a, b)
	if got := admit(t, b, idb, "acme", 100, now()); got != 59 {
		t.Fatalf("us admitted %d more, want 59 (100 - 10 headroom - 30 used in eu - its 1)", got)
	}
	syncAll(t, b, a)
	if got := admit(t, a, ida, "acme", 10, now()); got != 0 {
		t.Fatalf("eu admitted %d more after learning us's 60, want 0", got)
	}
	if got := admit(t, a, ida, "other", 100, now()); got != 90 {
		t.Fatalf("another key in eu: %d admitted, want 90 (its own allowance)", got)
	}
	if st := a.Stats(); st.OverAllowance == 0 || st.Syncs != 2 || st.Keys != 2 {
		t.Errorf("eu stats %+v", st)
	}
}

// TestRemainingIsTheAllowanceLeft: an admitted decision reports what its
// allowance has left, and a rejection for the allowance waits for the
// window's end and charges nothing.
func TestRemainingIsTheAllowanceLeft(t *testing.T) {
	x := new(regions.MemoryExchange)
	a, b := region(t, "eu", x), region(t, "us", x)
	ida, idb := register(t, a, daily), register(t, b, daily)
	admit(t, b, idb, "acme", 50, now())
	admit(t, a, ida, "acme", 1, now())
	syncAll(t, b, a)
	req := store.Request{Now: now()}
	req.Add(ida, "acme", 1)
	var res store.Result
	if err := a.Decide(context.Background(), &req, &res); err != nil || !res.Allowed || res.Decision().Remaining != 38 {
		t.Fatalf("%v %+v, want admitted with 38 left (100 - 10 - 50 - 2)", err, res.Decision())
	}
	admit(t, a, ida, "acme", 38, now())
	if err := a.Decide(context.Background(), &req, &res); err != nil || res.Allowed {
		t.Fatalf("over the allowance: %v %+v, want a rejection", err, res.Decision())
	}
	if d := res.Decision(); d.RetryAfter <= 0 || d.RetryAfter > 24*time.Hour || d.Limit != 100 {
		t.Errorf("rejection %+v, want the global limit and a wait to the window's end", d)
	}
	// The rejected charge was given back: another region learning eu's
	// count sees 40.
	syncAll(t, a)
	c := region(t, "ap", x)
	idc := register(t, c, daily)
	admit(t, c, idc, "acme", 1, now())
	syncAll(t, c)
	if got := admit(t, c, idc, "acme", 10, now()); got != 0 {
		t.Errorf("ap admitted %d with eu at 40 and us at 50 (allowance 0), want 0", got)
	}
}

// TestPerRegionLimitIsEnforcedInFullEachRegion: a limit marked per-region
// is every region's whole, any algorithm, and nothing is exchanged.
func TestPerRegionLimitIsEnforcedInFullEachRegion(t *testing.T) {
	x := new(regions.MemoryExchange)
	burst := store.Spec{Name: "ip-burst", Algorithm: store.TokenBucket, Limit: 10, Rate: ratelimit.Rate{Count: 10, Per: time.Minute}}
	a := region(t, "eu", x, regions.WithPerRegion("ip-burst"))
	b := region(t, "us", x, regions.WithPerRegion("ip-burst"))
	ida, idb := register(t, a, burst), register(t, b, burst)
	if got := admit(t, a, ida, "1.2.3.4", 20, now()); got != 10 {
		t.Fatalf("eu admitted %d, want 10", got)
	}
	syncAll(t, a, b)
	if got := admit(t, b, idb, "1.2.3.4", 20, now()); got != 10 {
		t.Fatalf("us admitted %d, want 10 (the whole limit again: per region)", got)
	}
	if st := a.Stats(); st.Keys != 0 {
		t.Errorf("a per-region limit tracked %d keys", st.Keys)
	}
}

// TestCutOffRegionKeepsItsLastAllowanceAndConverges: a region whose sync
// fails enforces the allowance it last learned; when the global store is
// back, one round brings both regions to the counts of the other.
func TestCutOffRegionKeepsItsLastAllowanceAndConverges(t *testing.T) {
	x := &flaky{Exchange: new(regions.MemoryExchange)}
	a, b := region(t, "eu", x), region(t, "us", x)
	ida, idb := register(t, a, daily), register(t, b, daily)
	admit(t, b, idb, "acme", 40, now())
	admit(t, a, ida, "acme", 1, now())
	syncAll(t, a, b, a)
	x.down.Store(true)
	if err := a.Sync(context.Background()); err == nil || !a.Stats().CutOff {
		t.Fatal("a sync on a global store that is down succeeded")
	}
	if got := admit(t, a, ida, "acme", 100, now()); got != 49 {
		t.Fatalf("cut off, eu admitted %d, want its last allowance, 49 (100 - 10 - 40 - 1)", got)
	}
	if got := admit(t, b, idb, "acme", 100, now()); got != 49 {
		t.Fatalf("us admitted %d, want 49 (it last saw eu at 1)", got)
	}
	x.down.Store(false)
	syncAll(t, a, b, a)
	if a.Stats().CutOff {
		t.Error("still cut off after a good round")
	}
	for _, s := range []struct {
		st *regions.Store
		id store.LimitID
	}{{a, ida}, {b, idb}} {
		if got := admit(t, s.st, s.id, "acme", 10, now()); got != 0 {
			t.Errorf("after converging: %d more admitted with 139 used of 100, want 0", got)
		}
	}
}

// TestCapacityFailsNewKeysUnavailable: past WithCapacity keys, a new key
// fails with store.ErrUnavailable before anything is charged; known keys
// go on.
func TestCapacityFailsNewKeysUnavailable(t *testing.T) {
	a := region(t, "eu", new(regions.MemoryExchange), regions.WithCapacity(2))
	id := register(t, a, daily)
	admit(t, a, id, "k1", 1, now())
	admit(t, a, id, "k2", 1, now())
	req := store.Request{Now: now()}
	req.Add(id, "k3", 1)
	if err := a.Decide(context.Background(), &req, new(store.Result)); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a third key: %v, want store.ErrUnavailable", err)
	}
	if got := admit(t, a, id, "k1", 1, now()); got != 1 {
		t.Error("a known key was refused")
	}
}

func TestRegisterValidates(t *testing.T) {
	a := region(t, "eu", new(regions.MemoryExchange))
	for _, spec := range []store.Spec{
		{Name: "bucket", Algorithm: store.TokenBucket, Limit: 10, Rate: ratelimit.Rate{Count: 1, Per: time.Second}},
		{Name: "sliding", Algorithm: store.SlidingWindow, Limit: 10, Window: time.Hour},
		{Name: "bad", Algorithm: store.FixedWindow, Limit: 0, Window: time.Hour},
	} {
		if _, err := a.Register(context.Background(), spec); err == nil || !strings.HasPrefix(err.Error(), "store: ") {
			t.Errorf("%s: %v, want an error starting with store: ", spec.Name, err)
		}
	}
}

func TestNewValidates(t *testing.T) {
	x := new(regions.MemoryExchange)
	for name, o := range map[string]regions.Option{
		"period 0":          regions.WithPeriod(0),
		"read delay 0":      regions.WithReadDelay(0),
		"read delay >= P":   regions.WithReadDelay(regions.DefaultPeriod),
		"headroom 1":        regions.WithHeadroom(1),
		"headroom negative": regions.WithHeadroom(-0.1),
		"capacity 0":        regions.WithCapacity(0),
		"sync timeout 0":    regions.WithSyncTimeout(0),
		"unnamed":           regions.WithPerRegion(""),
		"nil logger":        regions.WithLogger(nil),
		"nil":               nil,
	} {
		if s, err := regions.New("eu", store.NewMemory(), x, o); err == nil || !strings.HasPrefix(err.Error(), "regions: ") {
			if s != nil {
				_ = s.Close()
			}
			t.Errorf("%s: %v, want an error starting with regions: ", name, err)
		}
	}
	if _, err := regions.New("", store.NewMemory(), x); err == nil {
		t.Error("no region name: no error")
	}
	if _, err := regions.New("eu", nil, x); err == nil {
		t.Error("no store: no error")
	}
	if _, err := regions.New("eu", store.NewMemory(), nil); err == nil {
		t.Error("no exchange: no error")
	}
}

// TestUnregisterForgetsTheKeys: an unregistered limit is unknown to
// Decide, and its keys no longer count against the capacity.
func TestUnregisterForgetsTheKeys(t *testing.T) {
	a := region(t, "eu", new(regions.MemoryExchange), regions.WithCapacity(1))
	id := register(t, a, daily)
	admit(t, a, id, "k1", 1, now())
	if err := a.Unregister(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	req := store.Request{Now: now()}
	req.Add(id, "k1", 1)
	if err := a.Decide(context.Background(), &req, new(store.Result)); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("Decide on an unregistered limit: %v, want ErrUnknownLimit", err)
	}
	if err := a.Unregister(context.Background(), id); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("Unregister again: %v, want ErrUnknownLimit", err)
	}
	again := register(t, a, daily)
	if got := admit(t, a, again, "k2", 1, now()); got != 1 || a.Stats().Keys != 1 {
		t.Errorf("a new key after Unregister: %d admitted, %d keys tracked; want 1 and 1", got, a.Stats().Keys)
	}
}

// TestMaxWaitOnAGlobalQuotaIsUnsupported: a global quota's allowance is of
// the current window, so a hit that would reserve a later one is refused
// (errors.ErrUnsupported: shed then decides it at once); a per-region
// limit reserves on the region's store.
func TestMaxWaitOnAGlobalQuotaIsUnsupported(t *testing.T) {
	x := new(regions.MemoryExchange)
	s := region(t, "eu", x, regions.WithPerRegion("ip-burst"))
	quota := register(t, s, store.Spec{Name: "daily", Algorithm: store.FixedWindow, Limit: 10, Window: 24 * time.Hour})
	burst := register(t, s, store.Spec{Name: "ip-burst", Algorithm: store.TokenBucket, Limit: 1,
		Rate: ratelimit.Rate{Count: 1, Per: time.Second}})
	decide := func(id store.LimitID) (store.Result, error) {
		req := store.Request{Now: now()}
		req.Add(id, "k", 1)
		req.Hits[0].MaxWait = time.Minute
		var res store.Result
		err := s.Decide(context.Background(), &req, &res)
		return res, err
	}
	if _, err := decide(quota); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("a max wait on a global quota: %v, want errors.ErrUnsupported", err)
	}
	decide(burst)
	if res, err := decide(burst); err != nil || !res.Allowed || res.Wait <= 0 {
		t.Fatalf("a per-region bucket: %+v %v, want a reservation", res, err)
	}
}
