package shed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// limitRules returns rule set v: a per-key rule kept across versions, one
// that changes with v, and a Global one.
func limitRules(v int) []Rule {
	return []Rule{
		{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: 1000, Window: time.Hour, Capacity: 100},
		// A window change: the store cannot keep the state, so each version
		// registers a new limit and retires the one before.
		{Name: "user", Identity: User, Algorithm: FixedWindow, Limit: 100, Window: time.Hour + time.Duration(v)*time.Minute},
		{Name: "cap", Algorithm: Concurrency, Limit: 100},
	}
}

var alice = Attempt{IP: netip.MustParseAddr("192.0.2.1"), User: "alice"}

// admit decides alice's attempt, which must be admitted by the store (not
// failed open past it), and ends it.
func admit(t *testing.T, c *Controller) {
	t.Helper()
	d, tok, err := c.Decide(context.Background(), alice)
	if err != nil || !d.Allowed || d.FailedOpen {
		t.Fatalf("Decide: %v %+v", err, d)
	}
	tok.Done(Success)
}

// foreign registers a limit that is not the Controller's in m.
func foreign(t *testing.T, m *store.Memory) store.LimitID {
	t.Helper()
	id, err := m.Register(context.Background(), store.Spec{Name: "foreign", Algorithm: store.FixedWindow, Limit: 1, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestReloadDropsReplacedLimits: 50 reloads alternating two versions of a
// per-key rule, each with an override of another scale, leave a bounded
// number of limits in the caller's store (what the set in force uses, and
// what the reload before retired), and Close leaves none of them.
func TestReloadDropsReplacedLimits(t *testing.T) {
	m := store.NewMemory()
	other := foreign(t, m)
	c, err := New(limitRules(0), WithStore(m), quiet())
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour)
	for i := 1; i <= 50; i++ {
		err := c.Reload(Config{Rules: limitRules(i % 2), Overrides: []Override{
			{Rule: "user", Key: "alice", Factor: float64(2 + i%3), Until: until},
		}})
		if err != nil {
			t.Fatal(err)
		}
		// The foreign limit; ip, ip's CGNAT limit, user and the override in
		// force; user and the override of the set before, retired by this
		// reload.
		want := 1 + 4 + 2
		if i == 1 {
			want = 1 + 4 + 1 // New's set had no override
		}
		if n := m.Limits(); n != want {
			t.Fatalf("reload %d: %d limits in the store, want %d", i, n, want)
		}
		admit(t, c)
	}
	// SetOverrides alternating two scales takes the retired one up again.
	for i := range 10 {
		if err := c.SetOverrides([]Override{{Rule: "user", Key: "alice", Factor: float64(2 + i%2), Until: until}}); err != nil {
			t.Fatal(err)
		}
		if n := m.Limits(); n > 1+3+2 {
			t.Fatalf("override %d: %d limits in the store", i, n)
		}
		admit(t, c)
	}
	if st := c.Stats(); st.StoreErrors != 0 || st.FailedOpen != 0 {
		t.Fatalf("store errors %d, failed open %d: a decision met an unregistered limit", st.StoreErrors, st.FailedOpen)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := m.Limits(); n != 1 {
		t.Fatalf("after Close: %d limits in the store, want only the foreign one", n)
	}
	if err := m.Unregister(context.Background(), other); err != nil {
		t.Fatalf("the foreign limit: %v", err)
	}
}

// TestReloadDuringDecision: a decision that loaded a rule set makes its
// store call after two reloads replaced that set (made here by the
// categorizer, which runs in between): the set's limits are unregistered
// only once no decision can name them, not one reload late regardless.
func TestReloadDuringDecision(t *testing.T) {
	m := store.NewMemory()
	version := func(v int) []Rule {
		rules := limitRules(v)
		rules[1].Category = "x"
		return rules
	}
	var c *Controller
	reloaded := false
	cat := func(*http.Request) string {
		if !reloaded {
			reloaded = true
			for v := 1; v <= 2; v++ {
				if err := c.Reload(Config{Rules: version(v)}); err != nil {
					t.Error(err)
				}
			}
		}
		return "x"
	}
	var decisions []Decision
	var err error
	c, err = New(version(0), WithStore(m), WithCategory(cat), quiet(),
		WithClient(func(*http.Request) Client { return Client{User: "alice"} }),
		WithDecisionHook(func(d Decision) { decisions = append(decisions, d) }))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := httptest.NewRecorder()
	c.Middleware(http.HandlerFunc(ok)).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if !reloaded || len(decisions) != 1 || w.Code != http.StatusOK {
		t.Fatalf("reloaded %v, %d decisions, status %d", reloaded, len(decisions), w.Code)
	}
	if d := decisions[0]; !d.Allowed || d.FailedOpen || c.Stats().StoreErrors != 0 {
		t.Fatalf("the decision on the replaced set met a store error: %+v", d)
	}
	// Two quiet reloads: the first unregisters what the decision could
	// name, the second what the reload during it retired. Left: ip (and its
	// CGNAT limit) and user in force, and the user limit the last reload
	// retired.
	for v := 3; v <= 4; v++ {
		if err := c.Reload(Config{Rules: version(v)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.Limits(); n != 4 {
		t.Fatalf("%d limits in the store, want 4", n)
	}
}

// TestNewFailingUnregisters: a New that fails after registering some of
// its rules' limits leaves none of them in the caller's store.
func TestNewFailingUnregisters(t *testing.T) {
	tooMany := limitRules(0)
	for i := range store.MaxHits {
		tooMany = append(tooMany, Rule{Name: fmt.Sprint("r", i), Identity: Tenant, Algorithm: FixedWindow, Limit: 5, Window: time.Minute})
	}
	for name, rules := range map[string][]Rule{
		"bad last rule": append(limitRules(0), Rule{Name: "bad", Identity: User, Algorithm: FixedWindow, Window: time.Minute}),
		"repeated name": append(limitRules(0), limitRules(0)[1]),
		"tier, no default": append(limitRules(0),
			Rule{Name: "t", Identity: Tenant, Algorithm: FixedWindow, Limit: 5, Window: time.Minute, Tier: "pro"}),
		"too many per-key rules": tooMany,
	} {
		m := store.NewMemory()
		foreign(t, m)
		if _, err := New(rules, WithStore(m), quiet()); err == nil {
			t.Fatalf("%s: New succeeded", name)
		}
		if n := m.Limits(); n != 1 {
			t.Errorf("%s: %d limits left in the store, want only the foreign one", name, n)
		}
	}
}

// TestReloadFailingUnregisters: a Reload or SetOverrides that fails after
// registering limits unregisters them; the set in force keeps its own.
func TestReloadFailingUnregisters(t *testing.T) {
	m := store.NewMemory()
	c, err := New(limitRules(0), WithStore(m), quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := m.Limits()
	until := time.Now().Add(time.Hour)
	for name, cfg := range map[string]Config{
		"bad rule": {Rules: append(limitRules(1), Rule{Name: "bad", Identity: User, Algorithm: FixedWindow, Window: time.Minute})},
		"bad override": {Rules: limitRules(1), Overrides: []Override{
			{Rule: "user", Key: "alice", Factor: 2, Until: until},
			{Rule: "nope", Key: "alice", Factor: 2, Until: until},
		}},
	} {
		if err := c.Reload(cfg); err == nil {
			t.Fatalf("%s: Reload succeeded", name)
		}
		if n := m.Limits(); n != before {
			t.Errorf("%s: %d limits in the store, want %d", name, n, before)
		}
		admit(t, c)
	}
	err = c.SetOverrides([]Override{
		{Rule: "user", Key: "alice", Factor: 2, Until: until},
		{Rule: "user", Key: "bob", Factor: -1, Until: until},
	})
	if err == nil {
		t.Fatal("SetOverrides succeeded")
	}
	if n := m.Limits(); n != before {
		t.Errorf("SetOverrides: %d limits in the store, want %d", n, before)
	}
	admit(t, c)
}

// TestCloseUnregisters: Close unregisters every limit the Controller
// registered (in force, retired, overrides'); a store that fails to
// unregister makes Close return its error, and a later Close tries again.
// Decisions after Close, and the Done of a Token holding a lease, meet the
// store's errors without panicking.
func TestCloseUnregisters(t *testing.T) {
	m := store.NewMemory()
	f := storetest.NewFaulty(m)
	rules := append(limitRules(0),
		Rule{Name: "slots", Identity: User, Algorithm: Concurrency, Limit: 5, LeaseTTL: time.Minute},
		Rule{Name: "strict", Category: "strict", Identity: User, Algorithm: FixedWindow, Limit: 5, Window: time.Minute, Failure: FailClosed})
	c, err := New(rules, WithStore(f), quiet())
	if err != nil {
		t.Fatal(err)
	}
	rules[1].Limit++
	if err := c.Reload(Config{Rules: rules}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetOverrides([]Override{{Rule: "user", Key: "alice", Factor: 2, Until: time.Now().Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	_, held, err := c.Decide(context.Background(), alice)
	if err != nil {
		t.Fatal(err)
	}
	if m.Limits() == 0 {
		t.Fatal("nothing registered")
	}
	f.SetErr(store.Unavailable(errors.New("down")))
	if err := c.Close(); err == nil || !strings.HasPrefix(err.Error(), "shed: ") || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Close with a failing store: %v", err)
	}
	f.SetErr(nil)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := m.Limits(); n != 0 {
		t.Fatalf("after Close: %d limits in the store", n)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close again: %v", err)
	}
	held.Done(Success)
	if d, tok, err := c.Decide(context.Background(), alice); err != nil || !d.Allowed || !d.FailedOpen {
		t.Fatalf("after Close, a fail-open rule: %v %+v", err, d)
	} else {
		tok.Done(Success)
	}
	strict := alice
	strict.Category = "strict"
	if d, _, err := c.Decide(context.Background(), strict); err != nil || d.Allowed || d.Kind != Shedding {
		t.Fatalf("after Close, a fail-closed rule: %v %+v", err, d)
	}
	if st := c.Stats(); st.LeasesLost != 1 || st.Inflight != 0 {
		t.Fatalf("leases lost %d, inflight %d: want the lease of the unregistered limit lost", st.LeasesLost, st.Inflight)
	}
}
