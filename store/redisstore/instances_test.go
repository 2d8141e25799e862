package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
	"github.com/sluicehq/sluice/store/redisstore"
	"github.com/sluicehq/sluice/store/storetest"
)

// Instance tests: one real Fallback on a private redis-server, and other
// instances of its prefix played by members the test writes into the
// heartbeat set, so that the count N each heartbeat reports is the test's.
const instProbe = 20 * time.Millisecond

// heartbeatEpoch is the heartbeat script's epoch (its scores are µs since).
const heartbeatEpoch = 1700000000

// fakeInstances adds ids to prefix's heartbeat set as if they had just
// beaten (forever: their score lies far ahead, so they never expire).
func fakeInstances(t *testing.T, admin *redis.Client, prefix string, forever bool, ids ...string) {
	t.Helper()
	ctx := context.Background()
	now, err := admin.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	score := float64((now.Unix()-heartbeatEpoch)*1e6 + int64(now.Nanosecond()/1e3))
	if forever {
		score += 1e15
	}
	for _, id := range ids {
		if err := admin.ZAdd(ctx, "{"+prefix+"}:instances", redis.Z{Score: score, Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// oneInstance starts a Fallback on addr under prefix that trips at the
// first failure and recovers only after recoverAfter good probes.
func oneInstance(t *testing.T, addr, prefix string, recoverAfter int, opts ...fallback.Option) *instance {
	t.Helper()
	return oneInstanceOn(t, newClient(t, addr), prefix, recoverAfter, faultTimeout, opts...)
}

// oneInstanceOn is oneInstance on client c, with the store's deadline.
func oneInstanceOn(t *testing.T, c *redis.Client, prefix string, recoverAfter int, deadline time.Duration, opts ...fallback.Option) *instance {
	t.Helper()
	s, err := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithTimeout(deadline))
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]fallback.Option{fallback.WithProbeInterval(instProbe), fallback.WithTripAfter(1),
		fallback.WithRecoverAfter(recoverAfter), fallback.WithLogger(quiet)}, opts...)
	f, err := redisstore.NewFallback(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	id := storetest.MustRegister(t, f, store.Spec{Name: "api", Algorithm: store.FixedWindow, Limit: faultLimit, Window: time.Hour})
	return &instance{f: f, id: id}
}

// admitLocally sends n requests and returns how many were admitted
// locally; none may go to Redis.
func (in *instance) admitLocally(t *testing.T, n int) int {
	t.Helper()
	admitted := 0
	for range n {
		var req store.Request
		req.Now = clock.Now()
		req.Add(in.id, "tenant", 1)
		var res store.Result
		before := in.f.Stats().FallbackDecisions
		if err := in.f.Decide(context.Background(), &req, &res); err != nil {
			t.Fatal(err)
		}
		if in.f.Stats().FallbackDecisions == before {
			t.Fatal("a decision went to Redis while degraded")
		}
		if res.Allowed {
			admitted++
		}
	}
	return admitted
}

// waitBeats waits (bounded) until the first member of prefix's heartbeat
// set not in skip (the real instance) has beaten twice more on the
// server: the reply of the first of those has then been taken in.
func waitBeats(t *testing.T, admin *redis.Client, prefix string, skip map[string]bool) {
	t.Helper()
	key := "{" + prefix + "}:instances"
	var first float64
	waitFor(t, 5*time.Second, "two heartbeats of the instance", func() bool {
		zs, err := admin.ZRangeWithScores(context.Background(), key, 0, -1).Result()
		if err != nil {
			return false
		}
		for _, z := range zs {
			if skip[fmt.Sprint(z.Member)] {
				continue
			}
			if first == 0 {
				first = z.Score
			}
			return z.Score != first
		}
		return false
	})
}

// TestFallbackRestartEmptyKeepsLastKnownShare: an instance that counted 3
// and degraded keeps its share of a third while a Redis restarted empty
// counts it alone (N=1) before it recovers: its local admissions over
// the whole outage stay within limit/3.
func TestFallbackRestartEmptyKeepsLastKnownShare(t *testing.T) {
	srv := startServer(t)
	admin := newClient(t, srv.addr())
	prefix := "restart-share"
	fakeInstances(t, admin, prefix, true, "b", "c")
	in := oneInstance(t, srv.addr(), prefix, 1000)
	waitFor(t, 3*time.Second, "the instance counts 3", func() bool { return in.f.Stats().Instances == 3 })
	srv.kill()
	admitted := in.admitLocally(t, 4*faultLimit)
	if !in.f.Stats().Degraded || admitted != faultLimit/3 {
		t.Fatalf("degraded: %d admitted, want the share %d: %+v", admitted, faultLimit/3, in.f.Stats())
	}
	srv.start() // empty: the first heartbeat counts 1
	waitBeats(t, admin, prefix, nil)
	admitted += in.admitLocally(t, 4*faultLimit)
	st := in.f.Stats()
	if !st.Degraded {
		t.Fatalf("recovered early: %+v", st)
	}
	if admitted > faultLimit/3 || st.Instances != 3 {
		t.Errorf("%d admitted locally over the outage with N=%d, want at most %d (limit %d / 3 instances)",
			admitted, st.Instances, faultLimit/3, faultLimit)
	}
}

// TestFallbackCountsAVanishedInstanceForItsMemory: an instance that
// stopped beating (it may have lost Redis only, deciding on its share)
// still counts in N for the instance memory, so that a later outage
// leaves the others their shares of the last known N, not more; after
// the memory it no longer counts.
func TestFallbackCountsAVanishedInstanceForItsMemory(t *testing.T) {
	srv := startServer(t)
	admin := newClient(t, srv.addr())
	prefix := "vanished"
	fakeInstances(t, admin, prefix, false, "b") // b beats once, then goes quiet
	fakeInstances(t, admin, prefix, true, "c")
	in := oneInstance(t, srv.addr(), prefix, 3)
	// Well past the three probes after which b used to drop out.
	for range 5 {
		waitBeats(t, admin, prefix, map[string]bool{"b": true, "c": true})
	}
	if n := in.f.Stats().Instances; n != 3 {
		t.Errorf("N = %d after b went quiet, want 3 (within the instance memory)", n)
	}
	srv.kill()
	if admitted := in.admitLocally(t, 4*faultLimit); admitted != faultLimit/3 {
		t.Errorf("%d admitted locally, want %d: the share of the last known 3 instances", admitted, faultLimit/3)
	}
}

// TestFallbackForgetsAVanishedInstanceAfterItsMemory: past the instance
// memory, an instance that stopped beating no longer counts.
func TestFallbackForgetsAVanishedInstanceAfterItsMemory(t *testing.T) {
	srv := startServer(t)
	admin := newClient(t, srv.addr())
	prefix := "forgotten"
	fakeInstances(t, admin, prefix, false, "b")
	memory := 10 * instProbe
	in := oneInstance(t, srv.addr(), prefix, 3, fallback.WithInstanceMemory(memory))
	if n := in.f.Stats().Instances; n != 2 {
		t.Fatalf("N = %d, want 2", n)
	}
	waitFor(t, memory+3*time.Second, "b is forgotten", func() bool { return in.f.Stats().Instances == 1 })
}

// cutDialer dials addr until cut, then refuses, and cut also closes the
// connections it made: a partition between one instance and Redis.
type cutDialer struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (d *cutDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		return nil, errors.New("partitioned")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *cutDialer) partition() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = true
	for _, c := range d.conns {
		_ = c.Close()
	}
}

// TestPartitionAdmitsAtMostOneShareMore: when one of three instances
// loses Redis while the others keep it, the service admits at most the
// limit plus that instance's share, limit·(1 + 1/3): the two on Redis
// share the whole limit, the cut-off one decides on the share of the
// three it last counted. (The package doc quotes the figure.)
func TestPartitionAdmitsAtMostOneShareMore(t *testing.T) {
	srv := startServer(t)
	prefix := "partition"
	d := new(cutDialer)
	cut := redis.NewClient(&redis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: time.Second, DialerRetries: 1, Dialer: d.dial})
	t.Cleanup(func() { _ = cut.Close() })
	// The two on Redis must stay there: a generous deadline and
	// threshold, so that a slow call on a loaded machine trips neither.
	healthy := []fallback.Option{fallback.WithTripAfter(1000)}
	ins := []*instance{
		oneInstanceOn(t, cut, prefix, 3, faultTimeout),
		oneInstanceOn(t, newClient(t, srv.addr()), prefix, 3, faultTimeout+faultSlack, healthy...),
		oneInstanceOn(t, newClient(t, srv.addr()), prefix, 3, faultTimeout+faultSlack, healthy...),
	}
	waitFor(t, 3*time.Second, "every instance counts 3", func() bool {
		for _, in := range ins {
			if in.f.Stats().Instances != 3 {
				return false
			}
		}
		return true
	})
	d.partition()
	admitted := 0
	for range 2 * faultLimit {
		for _, in := range ins {
			if ok, _ := in.decide(t); ok {
				admitted++
			}
		}
	}
	if !ins[0].f.Stats().Degraded || ins[1].f.Stats().Degraded || ins[2].f.Stats().Degraded {
		t.Fatalf("want only the cut-off instance degraded: %+v %+v %+v", ins[0].f.Stats(), ins[1].f.Stats(), ins[2].f.Stats())
	}
	bound := faultLimit + faultLimit/3
	t.Logf("partition of 1 of 3 instances: %d admitted of a limit of %d (%.2fx)", admitted, faultLimit, float64(admitted)/faultLimit)
	if admitted > bound {
		t.Errorf("%d admitted during the partition, want at most %d = limit·(1 + 1/3)", admitted, bound)
	}
}
