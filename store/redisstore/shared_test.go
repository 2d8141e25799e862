package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
	"github.com/sluicehq/sluice/store/redisstore"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestTwoFallbacksOnOneStoreKeepTheirOwnLimits: two Fallbacks (two
// Controllers) around one Store, registering in turn, each decide every
// limit of theirs on its own share while Redis is down, whether the
// local store is made before or after the registrations, and neither
// knows the other's limits.
func TestTwoFallbacksOnOneStoreKeepTheirOwnLimits(t *testing.T) {
	for _, early := range []bool{false, true} {
		t.Run("local store made early "+strconv.FormatBool(early), func(t *testing.T) {
			c := newClient(t, "127.0.0.1:"+strconv.Itoa(storetest.FreePort(t)))
			s, err := redisstore.New(c, redisstore.WithPrefix("shared"))
			if err != nil {
				t.Fatal(err)
			}
			var fs [2]*redisstore.Fallback
			for i := range fs {
				f, err := redisstore.NewFallback(s, fallback.WithLogger(quiet), fallback.WithTripAfter(1),
					fallback.WithInstances(1), fallback.WithProbeInterval(time.Hour))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = f.Close() })
				fs[i] = f
			}
			ctx := context.Background()
			decide := func(f *redisstore.Fallback, id store.LimitID) (store.Result, error) {
				req := store.Request{Now: int64(time.Hour)}
				req.Add(id, "k", 1)
				var res store.Result
				err := f.Decide(ctx, &req, &res)
				return res, err
			}
			if early {
				// A decision of each makes its local store now.
				id := storetest.MustRegister(t, fs[0], store.Spec{Name: "a0", Algorithm: store.FixedWindow, Limit: 100, Window: time.Hour})
				_, _ = decide(fs[0], id)
				id = storetest.MustRegister(t, fs[1], store.Spec{Name: "b0", Algorithm: store.FixedWindow, Limit: 100, Window: time.Hour})
				_, _ = decide(fs[1], id)
			}
			limits := map[store.LimitID]int{}
			owner := map[store.LimitID]int{}
			for i, n := range []int{100, 4, 100, 6, 50, 2} {
				f := i % 2
				name := "l" + strconv.Itoa(i)
				if i == 0 {
					// Any name is a limit's, even one like the places
					// a Fallback holds for others' IDs.
					name = "redisstore: held place 0"
				}
				id := storetest.MustRegister(t, fs[f], store.Spec{Name: name, Algorithm: store.FixedWindow, Limit: int64(n), Window: time.Hour})
				limits[id], owner[id] = n, f
			}
			for id, n := range limits {
				f := fs[owner[id]]
				admitted := 0
				for range n + 4 {
					res, err := decide(f, id)
					if err != nil {
						t.Fatalf("limit %d: %v", id, err)
					}
					if res.Allowed {
						admitted++
						if got := res.Decision().Limit; got != int64(n) {
							t.Fatalf("limit %d decided on a limit of %d, want %d", id, got, n)
						}
					}
				}
				if admitted != n {
					t.Errorf("limit %d of %d: %d admitted locally", id, n, admitted)
				}
				if _, err := decide(fs[1-owner[id]], id); !errors.Is(err, store.ErrUnknownLimit) {
					t.Errorf("limit %d decided by the other Fallback: %v, want ErrUnknownLimit", id, err)
				}
			}
			for i, f := range fs {
				if st := f.Stats(); !st.Degraded || st.FallbackDecisions == 0 {
					t.Errorf("fallback %d: %+v", i, st)
				}
			}
		})
	}
}

// TestTwoFallbacksOnOneStoreCountOneInstance: two Fallbacks around one
// Store are one instance in N, and stay one until both Close.
func TestTwoFallbacksOnOneStoreCountOneInstance(t *testing.T) {
	srv := startServer(t)
	s, err := redisstore.New(newClient(t, srv.addr()), redisstore.WithPrefix("one-instance"), redisstore.WithTimeout(faultTimeout))
	if err != nil {
		t.Fatal(err)
	}
	other := oneInstance(t, srv.addr(), "one-instance", 3)
	var fs [2]*redisstore.Fallback
	for i := range fs {
		f, err := redisstore.NewFallback(s, fallback.WithLogger(quiet), fallback.WithProbeInterval(instProbe))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		fs[i] = f
	}
	waitFor(t, 3*time.Second, "N is 2", func() bool { return other.f.Stats().Instances == 2 })
	for i, f := range fs {
		if n := f.Stats().Instances; n != 2 {
			t.Errorf("fallback %d counts %d instances, want 2 (itself and the other process)", i, n)
		}
	}
	_ = fs[0].Close()
	admin := newClient(t, srv.addr())
	if n, err := admin.ZCard(context.Background(), "{one-instance}:instances").Result(); err != nil || n != 2 {
		t.Errorf("after one of the two Closed: %d instances in the set (%v), want 2", n, err)
	}
	_ = fs[1].Close()
	if n, err := admin.ZCard(context.Background(), "{one-instance}:instances").Result(); err != nil || n != 1 {
		t.Errorf("after both Closed: %d instances in the set (%v), want 1", n, err)
	}
}
