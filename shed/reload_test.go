package shed

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// versioned returns rule set number v: categorizer and rules that only
// make sense together (the rules name the category the categorizer gives),
// plus rules equal in every version whose state must survive.
func versioned(v int) Config {
	cat := fmt.Sprintf("c%d", v)
	return Config{
		Rules: []Rule{
			{Name: "keep-global", Algorithm: Concurrency, Limit: 1 << 20},
			{Name: "keep-ip", Identity: IP, Algorithm: FixedWindow, Limit: 1000, Window: 24 * time.Hour},
			{Name: fmt.Sprintf("v%d", v), Category: cat, Identity: User, Algorithm: FixedWindow, Limit: 1 << 30,
				Window: time.Hour},
		},
		Category: func(*http.Request) string { return cat },
	}
}

// Under load from several goroutines, reloads alternate between two rule
// sets: every request meets one set whole (its category has a versioned
// rule), the per-IP state of the unchanged rule survives (exactly its
// limit is admitted in total), and its counters too.
func TestReloadUnderLoad(t *testing.T) {
	var mixed, admitted, total atomic.Int64
	hook := func(d Decision) {
		total.Add(1)
		if d.Allowed {
			admitted.Add(1)
		}
		// The plan the request was decided by holds its set's versioned
		// rule; a request that met one set's category and another's rules
		// would have fallen to the plan of no category, which does not.
		versioned := false
		for _, i := range d.plan.stored {
			versioned = versioned || strings.HasPrefix(d.plan.rules[i].Name, "v")
		}
		if !versioned {
			mixed.Add(1)
		}
	}
	v0 := versioned(0)
	c, err := New(v0.Rules, WithCategory(v0.Category), quiet(),
		WithClient(func(*http.Request) Client { return Client{User: "u"} }), WithDecisionHook(hook))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	const workers, each = 4, 600
	stopReloads := reloadUntilStopped(t, c, func(v int) Config { return versioned(v % 2) })
	var work sync.WaitGroup
	for w := range workers {
		work.Add(1)
		go func() {
			defer work.Done()
			for range each {
				r := httptest.NewRequest("GET", "/", nil)
				r.RemoteAddr = "192.0.2.1:1000"
				h.ServeHTTP(httptest.NewRecorder(), r)
			}
			_ = w
		}()
	}
	work.Wait()
	reloads := stopReloads()
	if reloads < 2 {
		t.Logf("only %d reloads ran during the load", reloads)
	}
	if mixed.Load() != 0 {
		t.Fatalf("%d requests met a half-applied policy", mixed.Load())
	}
	if total.Load() != workers*each || admitted.Load() != 1000 {
		t.Fatalf("%d decisions, %d admitted; want %d and exactly keep-ip's 1000", total.Load(), admitted.Load(), workers*each)
	}
	st := c.Stats()
	if st.Rules[1].Name != "keep-ip" || st.Rules[1].Allowed != 1000 || st.Rules[1].Rejected != workers*each-1000 {
		t.Fatalf("keep-ip's counters did not survive: %+v", st.Rules[1])
	}
	if st.Rules[0].Allowed != 1000 || st.Inflight != 0 || st.Rules[0].Inflight != 0 {
		t.Fatalf("keep-global %+v, inflight %d", st.Rules[0], st.Inflight)
	}
	if st.StoreErrors != 0 {
		t.Fatalf("%d store errors: a decision met a limit its set's replacement unregistered", st.StoreErrors)
	}
	// The limits of replaced sets were unregistered: after two quiet
	// reloads the store holds keep-ip (and its CGNAT limit) and the
	// versioned rule in force, and the versioned rule the last reload
	// retired.
	for v := range 2 {
		if err := c.Reload(versioned(v)); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.storage.store.(*store.Memory).Limits(); n != 4 {
		t.Fatalf("%d limits in the store after %d reloads, want 4", n, reloads+2)
	}
}

// A bad rule set is rejected whole and the one in force stays.
func TestReloadRejectsBadConfig(t *testing.T) {
	v0 := versioned(0)
	c, err := New(v0.Rules, WithCategory(v0.Category), quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bad := versioned(1)
	bad.Rules = append(bad.Rules, Rule{Name: "broken", Identity: IP, Algorithm: FixedWindow, Limit: 0, Window: time.Second})
	if err := c.Reload(bad); err == nil {
		t.Fatal("a bad rule set was accepted")
	}
	badOverride := versioned(1)
	badOverride.Overrides = []Override{{Rule: "nope", Key: "x", Factor: 2, Until: time.Now().Add(time.Hour)}}
	if err := c.Reload(badOverride); err == nil {
		t.Fatal("a bad override was accepted")
	}
	if err := c.Reload(Config{}); err == nil {
		t.Fatal("an empty config was accepted")
	}
	if got := c.Stats().Rules[2].Name; got != "v0" {
		t.Fatalf("rules in force changed to %q", got)
	}
	if d, _, _ := c.Decide(context.Background(), Attempt{Category: "c0", User: "u"}); d.plan == c.set.Load().all {
		t.Fatal("category c0 is unknown to the rules in force")
	}
	// A rule whose window changed starts afresh; the store takes it under
	// a new name. (A changed limit alone keeps the usage:
	// TestReloadKeepsUsageOfAChangedLimit.)
	changed := versioned(0)
	changed.Rules[2].Limit, changed.Rules[2].Window = 1, 2*time.Hour
	if err := c.Reload(changed); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		d, tok, _ := c.Decide(context.Background(), Attempt{Category: "c0", User: "u"})
		if d.Allowed != want {
			t.Fatalf("decision %d: allowed %v", i, d.Allowed)
		}
		tok.Done(Success)
	}
}

// A reload that lands while a request is between its categorizer and its
// rules (here: made by the categorizer itself) does not reach that
// request: it is decided by the set whose categorizer it ran.
func TestReloadMidRequest(t *testing.T) {
	var c *Controller
	reloaded := false
	v0 := versioned(0)
	cat := func(r *http.Request) string {
		if !reloaded {
			reloaded = true
			if err := c.Reload(versioned(1)); err != nil {
				t.Error(err)
			}
		}
		return v0.Category(r)
	}
	var plans []*plan
	var err error
	c, err = New(v0.Rules, WithCategory(cat), quiet(), WithDecisionHook(func(d Decision) { plans = append(plans, d.plan) }),
		WithClient(func(*http.Request) Client { return Client{User: "u"} }))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})).
		ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	if !reloaded || len(plans) != 1 {
		t.Fatalf("reloaded %v, %d decisions", reloaded, len(plans))
	}
	names := []string{}
	for _, i := range plans[0].stored {
		names = append(names, plans[0].rules[i].Name)
	}
	if strings.Join(names, ",") != "keep-ip,v0" {
		t.Fatalf("the request was decided by rules %v, not v0's", names)
	}
}

// reloadUntilStopped reloads c with config(v) for v = 1, 2, ... in a
// goroutine of its own, as fast as Reload returns, until stop is called;
// stop waits for the goroutine and returns how many reloads ran. A failing
// Reload fails t and ends the loop.
func reloadUntilStopped(t *testing.T, c *Controller, config func(v int) Config) (stop func() int) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	reloads := 0
	wg.Go(func() {
		for v := 1; ; v++ {
			select {
			case <-done:
				return
			default:
			}
			if err := c.Reload(config(v)); err != nil {
				t.Error(err)
				return
			}
			reloads++
		}
	})
	return func() int {
		close(done)
		wg.Wait()
		return reloads
	}
}
