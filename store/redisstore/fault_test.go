package redisstore_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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
	// slow, when set, is told of a decision past the deadline and slack,
	// which is otherwise an error of the test's.
	slow func(took time.Duration)
}

// newInstancesWithin starts n Fallbacks, each with a client of its own, on
// addr under one prefix, their Stores' deadline timeout, and waits
// (bounded) until each counts n instances.
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
	waitFor(t, 10*time.Second, "every instance counts the others", func() bool {
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
		if in.slow != nil {
			in.slow(d)
		} else {
			t.Errorf("a decision took %v, more than the deadline %v + %v", d, timeout, faultSlack)
		}
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
// goes to Redis and the mode changes were logged. It returns why instead
// of failing t where a machine too slow for the deadline could be the
// cause: the recovery not within its bound, or not logged within 3s; a
// decision after it decided locally; the breaker tripped again.
func recovered(t *testing.T, ins []*instance) string {
	t.Helper()
	bound := faultProbe*(faultRecover+1) + 2*time.Second
	start := time.Now()
	for i, in := range ins {
		for in.f.Stats().Degraded {
			if time.Since(start) > bound {
				return fmt.Sprintf("instance %d: decisions did not return to Redis within %v: %+v", i, bound, in.f.Stats())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	t.Logf("recovered %v after the fault ended", time.Since(start))
	for i, in := range ins {
		if _, local := in.decide(t); local {
			return fmt.Sprintf("instance %d: decided locally after recovery: %+v", i, in.f.Stats())
		}
		// The log ends with the current mode (lines are at most one a
		// second apart).
		for logged := time.Now(); !strings.Contains(in.log.String(), "deciding on Redis"); time.Sleep(5 * time.Millisecond) {
			if time.Since(logged) > 3*time.Second {
				return fmt.Sprintf("instance %d: the recovery is not logged within 3s: %q", i, in.log.String())
			}
		}
		st := in.f.Stats()
		if st.Trips > 1 {
			return fmt.Sprintf("instance %d tripped %d times: %+v", i, st.Trips, st)
		}
		if logs := in.log.String(); !strings.Contains(logs, "deciding on local limits") || strings.Count(logs, "\n") > 2 {
			t.Errorf("instance %d: want two log lines, one per mode change: %q", i, logs)
		}
		if st.Trips < 1 || st.Recoveries < 1 {
			t.Errorf("instance %d stats: %+v", i, st)
		}
	}
	return ""
}

// TestFaultKillAndRestartEmpty: a killed server degrades every instance to
// its share, and they return to Redis once an empty one (no scripts, no
// state) starts on its port.
func TestFaultKillAndRestartEmpty(t *testing.T) {
	srv := startServer(t)
	faultTried(t, func(prefix string, timeout time.Duration) string {
		return degradesAndRecovers(t, srv.addr(), "fault-kill"+prefix, timeout, srv.kill, srv.start)
	})
}

// TestFaultPause: a paused server (SIGSTOP: connections open, no answer)
// degrades every instance to its share within about the deadline per
// decision, and they return to Redis once it resumes.
func TestFaultPause(t *testing.T) {
	srv := startServer(t)
	faultTried(t, func(prefix string, timeout time.Duration) string {
		return degradesAndRecovers(t, srv.addr(), "fault-pause"+prefix, timeout, srv.pause, srv.resume)
	})
}

// faultTries is how many times a fault test runs its scenario, the
// deadline doubled each time, before a try that could not show the case
// fails it.
const faultTries = 4

// faultTried runs try, a fault test's scenario, with a prefix of its own
// and faultTimeout as the deadline, until it shows the case. A loaded
// machine may miss 50ms on the live server too (the breaker trips on it)
// or take longer than the slack to give up on a failed one: try then
// returns why, and it runs again with twice the deadline, faultTries
// times at most.
func faultTried(t *testing.T, try func(prefix string, timeout time.Duration) string) {
	t.Helper()
	storetest.RetryDoubling(t, faultTries, faultTimeout, func(n int, timeout time.Duration) string {
		return try("-"+strconv.Itoa(n), timeout)
	})
}

// degradesAndRecovers is one try of a fault test: instances under prefix
// with the given deadline decide on Redis, fault makes it fail, every
// instance degrades (within 3s in all), heal ends the fault, and they
// recover. It fails t where the fallback is wrong and returns why when the
// machine was too slow for the try to show the case (the empty string
// when it showed it).
func degradesAndRecovers(t *testing.T, addr, prefix string, timeout time.Duration, fault, heal func()) string {
	t.Helper()
	ins := newInstancesWithin(t, addr, prefix, faultInstances, timeout)
	var slow []time.Duration
	for _, in := range ins {
		in.slow = func(d time.Duration) { slow = append(slow, d) }
	}
	for i, in := range ins {
		ok, local := in.decide(t)
		if local {
			return fmt.Sprintf("instance %d decided locally on the live server: %+v", i, in.f.Stats())
		}
		if !ok {
			t.Fatalf("healthy: instance %d rejected on Redis", i)
		}
	}
	fault()
	began := time.Now()
	degrade(t, ins)
	took := time.Since(began)
	heal()
	switch {
	case len(slow) > 0:
		return fmt.Sprintf("decisions took %v, past the deadline and %v of slack", slow, faultSlack)
	case took > 3*time.Second:
		return fmt.Sprintf("degrading took %v during the fault", took)
	}
	if why := recovered(t, ins); why != "" {
		return why
	}
	if len(slow) > 0 {
		return fmt.Sprintf("decisions took %v after the recovery, past the deadline and %v of slack", slow, faultSlack)
	}
	return ""
}

// TestFaultOutOfMemory: a server out of memory (noeviction) degrades every
// instance to its share, and they return to Redis once it has room again.
func TestFaultOutOfMemory(t *testing.T) {
	srv := startServer(t, "--maxmemory-policy", "noeviction")
	admin := newClient(t, srv.addr())
	ctx := context.Background()
	fill := func() {
		if err := admin.ConfigSet(ctx, "maxmemory", "8mb").Err(); err != nil {
			t.Fatal(err)
		}
		// SETRANGE grows a value with a small command, so that no large
		// query buffer is freed after the OOM reply (which would bring the
		// server back under maxmemory). A later try finds it full at once.
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
	}
	room := func() {
		if err := admin.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
			t.Fatal(err)
		}
	}
	faultTried(t, func(prefix string, timeout time.Duration) string {
		return degradesAndRecovers(t, srv.addr(), "fault-oom"+prefix, timeout, fill, room)
	})
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
