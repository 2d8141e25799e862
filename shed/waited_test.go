package shed

import (
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/ratelimit"
)

// A request that waited past an Adaptive rule's queue bound is shed by
// ShedWaited as Decide sheds it: the same Retry-After, counted in the
// Controller's and the rule's stats and the rule's ShedByWait, told to the
// decision hook; a per-key rule after it is charged nothing. One that
// waited no longer than the bound is left to Decide, and nothing is
// counted for it.
func TestShedWaitedShedsAsDecideDoesForTheWait(t *testing.T) {
	var told []Decision
	c, err := New([]Rule{
		defaultRule(t),
		{Name: "ip", Identity: IP, Algorithm: Concurrency, Limit: 10, LeaseTTL: time.Minute},
	}, quiet(), WithDecisionHook(func(d Decision) { told = append(told, d) }))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ra, shed := c.ShedWaited(20 * time.Millisecond); shed || ra != 0 {
		t.Fatalf("waited 20ms: shed %v (Retry-After %v); want left to Decide", shed, ra)
	}
	ra, shed := c.ShedWaited(21 * time.Millisecond)
	if !shed {
		t.Fatal("waited 21ms: not shed")
	}
	d, _, err := c.Decide(t.Context(), Attempt{Queued: 21 * time.Millisecond, IP: netip.MustParseAddr("10.0.0.1")})
	if err != nil || d.Allowed {
		t.Fatalf("Decide of the same wait: %+v, %v", d, err)
	}
	if ra != d.RetryAfter {
		t.Fatalf("Retry-After %v, Decide's %v", ra, d.RetryAfter)
	}
	if len(told) != 2 || told[0].Allowed || told[0].Kind != Shedding || told[0].Rule != "endpoint" || told[0].RetryAfter != ra {
		t.Fatalf("the hook was told %+v; want the shed by endpoint, twice", told)
	}
	st := c.Stats()
	if st.Shedding != 2 || st.Admitted != 0 {
		t.Fatalf("stats: %d shed, %d admitted; want 2, 0", st.Shedding, st.Admitted)
	}
	if rs := st.Rules[0]; rs.Rejected != 2 || rs.ShedByWait != 2 {
		t.Fatalf("endpoint: %d rejected, %d shed by wait; want 2, 2", rs.Rejected, rs.ShedByWait)
	}
	if rs := st.Rules[1]; rs.Allowed != 0 || rs.Rejected != 0 {
		t.Fatalf("ip: %d allowed, %d rejected; want nothing decided", rs.Allowed, rs.Rejected)
	}
}

// ShedWaited decides only where nothing of the request could change the
// outcome: for every rule set or option that could, it leaves the request
// to Decide and counts nothing, however long it waited.
func TestShedWaitedLeavesToDecideWhatTheRequestCouldChange(t *testing.T) {
	cases := []struct {
		name  string
		rules func(t *testing.T) []Rule
		opts  func(t *testing.T) []Option
	}{
		{"a client function", nil, func(*testing.T) []Option {
			return []Option{WithClient(func(*http.Request) Client { return Client{Priority: CriticalPlus} })}
		}},
		{"exemptions", nil, func(*testing.T) []Option {
			return []Option{WithExemptions(Exemptions{Paths: []string{"/healthz"}})}
		}},
		{"a penalty box", nil, func(*testing.T) []Option {
			return []Option{WithPenalties(&fakePenalties{strikes: map[string]int{}}, IP)}
		}},
		{"suspicion", nil, func(t *testing.T) []Option { return []Option{WithSuspicion(noAgentSuspicion(t))} }},
		{"a dry run", nil, func(*testing.T) []Option { return []Option{WithDryRun()} }},
		{"a rejection writer", nil, func(*testing.T) []Option {
			return []Option{WithRejection(func(w http.ResponseWriter, _ *http.Request, _ Decision) { w.WriteHeader(http.StatusTeapot) })}
		}},
		{"a header function", nil, func(*testing.T) []Option {
			return []Option{WithHeaders(func(http.Header, Decision) {})}
		}},
		{"a rule in dry-run", func(t *testing.T) []Rule {
			r := defaultRule(t)
			r.DryRun = true
			return []Rule{r}
		}, nil},
		{"a rule of a category", func(t *testing.T) []Rule {
			return []Rule{defaultRule(t), {Name: "writes", Category: "write", Identity: IP, Algorithm: TokenBucket, Limit: 10, Rate: ratelimit.Per(1, time.Second)}}
		}, nil},
		{"tiers", func(t *testing.T) []Rule {
			return []Rule{defaultRule(t), {Name: "free", Tier: "free", Identity: IP, Algorithm: TokenBucket, Limit: 10, Rate: ratelimit.Per(1, time.Second)}}
		}, func(*testing.T) []Option { return []Option{WithDefaultTier("free")} }},
		{"a Global rate rule", func(t *testing.T) []Rule {
			return []Rule{{Name: "cap", Algorithm: TokenBucket, Limit: 100, Rate: ratelimit.Per(100, time.Second)}, defaultRule(t)}
		}, nil},
		{"a Concurrency rule first", func(t *testing.T) []Rule {
			return []Rule{{Name: "inflight", Algorithm: Concurrency, Limit: 8}, defaultRule(t)}
		}, nil},
		{"a per-key rate rule, whose policy the answer names", func(t *testing.T) []Rule {
			return []Rule{defaultRule(t), {Name: "ip", Identity: IP, Algorithm: TokenBucket, Limit: 10, Rate: ratelimit.Per(1, time.Second)}}
		}, nil},
		{"no queue bound", func(t *testing.T) []Rule { return []Rule{defaultRule(t, adaptive.WithoutSchedulingSignal())} }, nil},
		{"no Adaptive rule", func(*testing.T) []Rule {
			return []Rule{{Name: "ip", Identity: IP, Algorithm: TokenBucket, Limit: 10, Rate: ratelimit.Per(1, time.Second)}}
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rules := []Rule{defaultRule(t)}
			if tc.rules != nil {
				rules = tc.rules(t)
			}
			opts := []Option{quiet()}
			if tc.opts != nil {
				opts = append(opts, tc.opts(t)...)
			}
			c, err := New(rules, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, shed := c.ShedWaited(time.Hour); shed {
				t.Fatal("shed before the request was read")
			}
			if st := c.Stats(); st.Shedding != 0 {
				t.Fatalf("counted %d sheds", st.Shedding)
			}
		})
	}
}

// The rule set in force decides: a Reload to a set that ShedWaited cannot
// decide on stops it, one back to an Adaptive rule alone starts it again.
func TestShedWaitedFollowsTheRulesInForce(t *testing.T) {
	endpoint := defaultRule(t)
	c, err := New([]Rule{endpoint}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, shed := c.ShedWaited(time.Hour); !shed {
		t.Fatal("not shed under an Adaptive rule alone")
	}
	if err := c.Reload(Config{Rules: []Rule{{Name: "cap", Algorithm: TokenBucket, Limit: 100, Rate: ratelimit.Per(100, time.Second)}, endpoint}}); err != nil {
		t.Fatal(err)
	}
	if _, shed := c.ShedWaited(time.Hour); shed {
		t.Fatal("shed under a rate rule decided first")
	}
	if err := c.Reload(Config{Rules: []Rule{endpoint}}); err != nil {
		t.Fatal(err)
	}
	if _, shed := c.ShedWaited(time.Hour); !shed {
		t.Fatal("not shed after the reload back")
	}
}
