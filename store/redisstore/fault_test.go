package redisstore_test

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
	"github.com/sluicehq/sluice/store/redisstore"
	"github.com/sluicehq/sluice/store/storetest"
)

// Fault tests: three Fallback instances on a private redis-server share a
// fixed window of 30 per hour (so nothing resets during a test): 10 each
// while degraded.
const (
	faultLimit     = 30
	faultInstances = 3
	faultProbe     = 50 * time.Millisecond
	faultRecover   = 2
	faultTimeout   = 50 * time.Millisecond
	// faultSlack is the generous margin over the deadline a call may take
	// on a loaded CI machine under -race; it bounds a hung call, not
	// performance.
	faultSlack = 400 * time.Millisecond
)

type instance struct {
	f       *redisstore.Fallback
	id      store.LimitID
	log     *storetest.LogBuffer
	timeout time.Duration // the Store's deadline; faultTimeout when 0
}

// newInstances starts n Fallbacks, each with a client of its own, on addr
// under one prefix, and waits (bounded) until each counts n instances.
// Their Stores' deadline is faultTimeout.
func newInstances(t *testing.T, addr, prefix string, n int) []*instance {
	t.Helper()
	return newInstancesWithin(t, addr, prefix, n, faultTimeout)
}

// newInstancesWithin is newInstances with the given deadline.
func newInstancesWithin(t *testing.T, addr, prefix string, n int, timeout time.Duration) []*instance {
	t.Helper()
	var out []*instance
	for range n {
		c := newClient(t, addr)
		s, err := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithTimeout(timeout))
		if err != nil {
			t.Fatal(err)
		}
		buf := new(storetest.LogBuffer)
		f, err := redisstore.NewFallback(s, fallback.WithProbeInterval(faultProbe),
			fallback.WithRecoverAfter(faultRecover), fallback.WithTripAfter(2),
			fallback.WithLogger(slog.New(slog.NewTextHandler(buf, nil))))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		id := storetest.MustRegister(t, f, store.Spec{Name: "api", Algorithm: store.FixedWindow, Limit: faultLimit, Window: time.Hour})
		out = append(out, &instance{f: f, id: id, log: buf, timeout: timeout})
	}
	waitFor(t, 3*time.Second, "every instance counts the others", func() bool {
		for _, in := range out {
			if in.f.Stats().Instances != int64(n) {
				return false
			}
		}
		return true
	})
	return out
}

// waitFor polls cond every few ms until it holds, failing after max.
func waitFor(t *testing.T, max time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > max {
			t.Fatalf("%s: not within %v", what, max)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// decide decides one hit of cost 1 and checks that it took no longer than
// the deadline plus slack. It reports whether it was admitted and whether
// it was decided locally.
func (in *instance) decide(t *testing.T) (allowed, local bool) {
	t.Helper()
	var req store.Request
	req.Now = clock.Now()
	req.Add(in.id, "tenant", 1)
	var res store.Result
	before := in.f.Stats().FallbackDecisions
	start := time.Now()
	err := in.f.Decide(context.Background(), &req, &res)
	timeout := cmp.Or(in.timeout, faultTimeout)
	if d := time.Since(start); d > timeout+faultSlack {
		t.Errorf("a decision took %v, more than the deadline %v + %v", d, timeout, faultSlack)
	}
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return res.Allowed, in.f.Stats().FallbackDecisions > before
}

// degrade sends requests from every instance until each is degraded and
// then 4·share more: each instance admits exactly its share (10) locally.
func degrade(t *testing.T, ins []*instance) {
	t.Helper()
	share := faultLimit / faultInstances
	for i, in := range ins {
		localAdmitted, sent := 0, 0
		for !in.f.Stats().Degraded {
			if sent++; sent > 50 {
				t.Fatalf("instance %d not degraded after %d requests: %+v", i, sent, in.f.Stats())
			}
			if ok, local := in.decide(t); ok && local {
				localAdmitted++
			}
		}
		for range 4 * share {
			ok, local := in.decide(t)
			if !local {
				t.Fatalf("instance %d: a decision went to Redis while degraded", i)
			}
			if ok {
				localAdmitted++
			}
		}
		if localAdmitted != share {
			t.Errorf("instance %d admitted %d locally, want its share %d of %d", i, localAdmitted, share, faultLimit)
		}
		if st := in.f.Stats(); st.Instances != faultInstances || st.Share != 1.0/faultInstances || st.FallbackDecisions == 0 {
			t.Errorf("instance %d stats while degraded: %+v", i, st)
		}
	}
}

// recovered waits until every instance decides on Redis again, within the
// probe interval times the hysteresis plus slack, and checks one decision
// goes to Redis and the mode changes were logged.
func recovered(t *testing.T, ins []*instance) {
	t.Helper()
	bound := faultProbe*(faultRecover+1) + 2*time.Second
	took := waitFor(t, bound, "decisions return to Redis", func() bool {
		for _, in := range ins {
			if in.f.Stats().Degraded {
				return false
			}
		}
		return true
	})
	t.Logf("recovered %v after the fault ended", took)
	for i, in := range ins {
		if _, local := in.decide(t); local {
			t.Errorf("instance %d: decided locally after recovery", i)
		}
		// The log ends with the current mode (lines are at most one a
		// second apart).
		waitFor(t, 3*time.Second, "the recovery is logged", func() bool {
			return strings.Contains(in.log.String(), "deciding on Redis")
		})
		if logs := in.log.String(); !strings.Contains(logs, "deciding on local limits") || strings.Count(logs, "\n") > 2 {
			t.Errorf("instance %d: want two log lines, one per mode change: %q", i, logs)
		}
		if st := in.f.Stats(); st.Trips < 1 || st.Recoveries < 1 {
			t.Errorf("instance %d stats: %+v", i, st)
		}
	}
}

func TestFaultKillAndRestartEmpty(t *testing.T) {
	srv := startServer(t)
	ins := newInstances(t, srv.addr(), "fault-kill", faultInstances)
	for _, in := range ins {
		if ok, local := in.decide(t); !ok || local {
			t.Fatalf("healthy: allowed %v local %v", ok, local)
		}
	}
	srv.kill()
	degrade(t, ins)
	srv.start() // empty: no scripts, no state
	recovered(t, ins)
}

func TestFaultPause(t *testing.T) {
	srv := startServer(t)
	ins := newInstances(t, srv.addr(), "fault-pause", faultInstances)
	srv.pause()
	paused := time.Now()
	degrade(t, ins)
	if d := time.Since(paused); d > 3*time.Second {
		t.Errorf("degrading took %v while paused", d)
	}
	srv.resume()
	recovered(t, ins)
}

func TestFaultOutOfMemory(t *testing.T) {
	srv := startServer(t, "--maxmemory-policy", "noeviction")
	ins := newInstances(t, srv.addr(), "fault-oom", faultInstances)
	admin := newClient(t, srv.addr())
	ctx := context.Background()
	if err := admin.ConfigSet(ctx, "maxmemory", "8mb").Err(); err != nil {
		t.Fatal(err)
	}
	// SETRANGE grows a value with a small command, so that no large
	// query buffer is freed after the OOM reply (which would bring the
	// server back under maxmemory).
	for i := 0; ; i++ {
		err := admin.SetRange(ctx, "fill:"+strconv.Itoa(i), 256<<10, "x").Err()
		if err != nil {
			if !strings.Contains(err.Error(), "OOM") {
				t.Fatalf("filling: %v", err)
			}
			break
		}
		if i > 1000 {
			t.Fatal("never reached maxmemory")
		}
	}
	degrade(t, ins)
	if err := admin.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	recovered(t, ins)
}

// TestFaultScriptFlush: SCRIPT FLUSH is no outage: the next decisions
// reload the script and succeed on Redis, with no error counted. No
// deadline is tested here: the Stores have one that a loaded machine
// meets, reload included (faultTimeout's 50ms it may not).
func TestFaultScriptFlush(t *testing.T) {
	const patient = 5 * time.Second
	srv := startServer(t)
	ins := newInstancesWithin(t, srv.addr(), "fault-flush", 1, patient)
	admin := newClient(t, srv.addr())
	in := ins[0]
	for round := range 3 {
		if err := admin.ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		if ok, local := in.decide(t); !ok || local {
			t.Fatalf("round %d after SCRIPT FLUSH: allowed %v local %v", round, ok, local)
		}
	}
	if st := in.f.Stats(); st.RemoteErrors != 0 || st.Degraded {
		t.Fatalf("SCRIPT FLUSH counted as a failure: %+v", st)
	}
	// The plain Store too: no error at all.
	s, err := redisstore.New(newClient(t, srv.addr()), redisstore.WithPrefix("fault-flush-store"), redisstore.WithTimeout(patient))
	if err != nil {
		t.Fatal(err)
	}
	id := storetest.MustRegister(t, s, store.Spec{Name: "x", Algorithm: store.Concurrency, Limit: 2, LeaseTTL: time.Minute})
	var req store.Request
	req.Add(id, "k", 1)
	var res store.Result
	if err := admin.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Decide(context.Background(), &req, &res); err != nil || !res.Allowed {
		t.Fatalf("Decide after SCRIPT FLUSH: %v %+v", err, res)
	}
	if err := admin.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(context.Background(), res.Hits[0].Lease, 0); err != nil {
		t.Fatalf("Release after SCRIPT FLUSH: %v", err)
	}
}

// TestStoreDeadline: a paused server costs a Store call its deadline, and
// the error matches store.ErrUnavailable; a caller's cancelled context
// returns ctx.Err().
func TestStoreDeadline(t *testing.T) {
	srv := startServer(t)
	s, err := redisstore.New(newClient(t, srv.addr()), redisstore.WithPrefix("deadline"), redisstore.WithTimeout(faultTimeout))
	if err != nil {
		t.Fatal(err)
	}
	id := storetest.MustRegister(t, s, store.Spec{Name: "x", Algorithm: store.FixedWindow, Limit: 5, Window: time.Minute})
	var req store.Request
	req.Add(id, "k", 1)
	var res store.Result
	if err := s.Decide(context.Background(), &req, &res); err != nil {
		t.Fatal(err)
	}
	srv.pause()
	defer srv.resume()
	start := time.Now()
	err = s.Decide(context.Background(), &req, &res)
	if d := time.Since(start); d > faultTimeout+faultSlack {
		t.Errorf("Decide on a paused server took %v", d)
	}
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Decide on a paused server: %v, want ErrUnavailable", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Decide(ctx, &req, &res); !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Decide with a cancelled context: %v, want context.Canceled", err)
	}
	srv.kill()
	if err := s.Decide(context.Background(), &req, &res); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Decide on a dead server: %v, want ErrUnavailable", err)
	}
	var ue *store.UnavailableError
	if !errors.As(err, &ue) || ue.Cause == nil {
		t.Errorf("error %v carries no cause", err)
	}
}
