package store_test

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// TestTopKeysRanksByUseAndResetsByHash: for every algorithm, TopKeys
// reports the n most used keys, most used first, leaves out keys that use
// nothing, takes nothing itself (the same call twice says the same), and
// ResetHash of a reported hash gives that key its whole limit back and
// no other.
func TestTopKeysRanksByUseAndResetsByHash(t *testing.T) {
	ctx := context.Background()
	const now = int64(1) << 50
	for _, spec := range []store.Spec{
		{Name: "bucket", Algorithm: store.TokenBucket, Limit: 10, Rate: ratelimit.Per(1, time.Hour)},
		{Name: "fixed", Algorithm: store.FixedWindow, Limit: 10, Window: time.Hour},
		{Name: "sliding", Algorithm: store.SlidingWindow, Limit: 10, Window: time.Hour},
		{Name: "log", Algorithm: store.SlidingLog, Limit: 10, Window: time.Hour},
		{Name: "inflight", Algorithm: store.Concurrency, Limit: 10, LeaseTTL: time.Hour},
	} {
		m := store.NewMemory()
		id, err := m.Register(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		hit := func(key string, cost int64) bool {
			req := store.Request{Now: now}
			req.Add(id, key, cost)
			var res store.Result
			if err := m.Decide(ctx, &req, &res); err != nil {
				t.Fatal(err)
			}
			return res.Allowed
		}
		// Key k uses k units; "idle" is only peeked at (an entry using
		// nothing).
		for k := 1; k <= 6; k++ {
			hit("k"+strconv.Itoa(k), int64(k))
		}
		hit("idle", 0)
		top, err := m.TopKeys(id, 4, now)
		if err != nil {
			t.Fatal(err)
		}
		if len(top) != 4 {
			t.Fatalf("%s: %d keys, want 4: %+v", spec.Name, len(top), top)
		}
		for i, u := range top {
			want := int64(6 - i)
			if u.Used != want || u.Limit != 10 || u.Remaining != 10-want || u.ResetAfter <= 0 || u.Hash == 0 {
				t.Errorf("%s: key %d is %+v, want %d used of 10", spec.Name, i, u, want)
			}
		}
		all, _ := m.TopKeys(id, store.MaxTopKeys, now)
		if len(all) != 6 {
			t.Errorf("%s: %d keys in use, want 6 (the idle one left out): %+v", spec.Name, len(all), all)
		}
		if again, _ := m.TopKeys(id, 4, now); len(again) != 4 || again[0] != top[0] {
			t.Errorf("%s: a second TopKeys differs: %+v, then %+v", spec.Name, top, again)
		}
		if err := m.ResetHash(ctx, id, top[0].Hash); err != nil {
			t.Fatal(err)
		}
		if !hit("k6", 10) {
			t.Errorf("%s: the reset key did not get its whole limit back", spec.Name)
		}
		if hit("k5", 6) {
			t.Errorf("%s: resetting k6 reset k5 too", spec.Name)
		}
		if err := m.ResetHash(ctx, id, 12345); err != nil {
			t.Errorf("%s: resetting a hash no key has: %v", spec.Name, err)
		}
	}
}

func TestTopKeysRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	id, err := m.Register(ctx, store.Spec{Name: "b", Algorithm: store.TokenBucket, Limit: 1, Rate: ratelimit.Per(1, time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, -1, store.MaxTopKeys + 1} {
		if _, err := m.TopKeys(id, n, 0); err == nil {
			t.Errorf("TopKeys(%d) took a count outside [1, %d]", n, store.MaxTopKeys)
		}
	}
	if _, err := m.TopKeys(id+1, 1, 0); !errors.Is(err, store.ErrUnknownLimit) {
		t.Errorf("TopKeys of an unknown limit: %v", err)
	}
	if err := m.ResetHash(ctx, id+1, 1); !errors.Is(err, store.ErrUnknownLimit) {
		t.Errorf("ResetHash of an unknown limit: %v", err)
	}
}

// BenchmarkTopKeys: the 10 most used of a token bucket limit's keys, the
// table at the default capacity and half full: the cost of one status
// page's hot-key list for one rule.
func BenchmarkTopKeys(b *testing.B) {
	ctx := context.Background()
	m := store.NewMemory()
	id, err := m.Register(ctx, store.Spec{Name: "b", Algorithm: store.TokenBucket, Limit: 100, Rate: ratelimit.Per(1, time.Hour)})
	if err != nil {
		b.Fatal(err)
	}
	const now = int64(1) << 50
	for i := range store.DefaultCapacity / 2 {
		req := store.Request{Now: now}
		req.Add(id, strconv.Itoa(i), int64(1+i%50))
		var res store.Result
		if err := m.Decide(ctx, &req, &res); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if top, err := m.TopKeys(id, 10, now); err != nil || len(top) != 10 || top[0].Used != 50 {
			b.Fatalf("%+v, %v", top, err)
		}
	}
}

// TestTopKeysIsTheTopOfTheModel: whatever keys use, TopKeys(n) reports the
// n largest uses (as a multiset: keys of equal use tie), most used first,
// each with Used + Remaining = Limit, and leaves out the keys that use
// nothing.
func TestTopKeysIsTheTopOfTheModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		m := store.NewMemory()
		const limit = 20
		id, err := m.Register(ctx, store.Spec{Name: "b", Algorithm: store.TokenBucket, Limit: limit, Rate: ratelimit.Per(1, time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		const now = int64(1) << 50
		uses := rapid.SliceOfN(rapid.Int64Range(0, limit), 0, 60).Draw(t, "uses")
		var model []int64
		for i, u := range uses {
			req := store.Request{Now: now}
			req.Add(id, strconv.Itoa(i), u)
			var res store.Result
			if err := m.Decide(ctx, &req, &res); err != nil {
				t.Fatal(err)
			}
			if u > 0 {
				model = append(model, u)
			}
		}
		slices.SortFunc(model, func(a, b int64) int { return cmp.Compare(b, a) })
		n := rapid.IntRange(1, 70).Draw(t, "n")
		top, err := m.TopKeys(id, n, now)
		if err != nil {
			t.Fatal(err)
		}
		want := model[:min(n, len(model))]
		if len(top) != len(want) {
			t.Fatalf("%d keys, want %d", len(top), len(want))
		}
		for i, u := range top {
			if u.Used != want[i] || u.Used+u.Remaining != u.Limit || u.Limit != limit {
				t.Fatalf("key %d: %+v, want %d used of %d", i, u, want[i], limit)
			}
		}
	})
}
