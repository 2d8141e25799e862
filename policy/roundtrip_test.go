package policy_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/queueing"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// genRule draws a rule that shed.New accepts, over every field the
// algorithm takes.
func genRule(t *rapid.T, i int) shed.Rule {
	dur := func(label string, max int64) time.Duration {
		// Whole units of every size, so that each duration spelling is met.
		units := []time.Duration{1, time.Microsecond, time.Millisecond, time.Second,
			time.Minute, time.Hour, 24 * time.Hour}
		for len(units) > 1 && int64(units[len(units)-1]) > max {
			units = units[:len(units)-1]
		}
		unit := rapid.SampledFrom(units).Draw(t, label+"-unit")
		return unit * time.Duration(rapid.Int64Range(1, max/int64(unit)).Draw(t, label))
	}
	r := shed.Rule{
		Name:      fmt.Sprintf("rule-%d", i),
		Category:  rapid.SampledFrom([]string{"", "read", "write", "auth", "reports"}).Draw(t, "category"),
		Identity:  shed.Identity(rapid.IntRange(int(shed.Global), int(shed.Composite)).Draw(t, "identity")),
		Algorithm: shed.Algorithm(rapid.IntRange(int(shed.TokenBucket), int(shed.Concurrency)).Draw(t, "algorithm")),
		DryRun:    rapid.Bool().Draw(t, "dry"),
		Tier:      rapid.SampledFrom([]string{"", "", "free", "pro"}).Draw(t, "tier"),
	}
	if r.Identity == shed.Composite {
		parts := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"ip", "user", "api_key", "tenant", "route", "ja4",
			"header:X-Model", "attr:model"}), 1, shed.MaxKeyParts, rapid.ID).Draw(t, "key")
		copy(r.Key[:], parts)
	}
	if r.Algorithm != shed.Concurrency {
		r.Count = shed.Count(rapid.IntRange(0, 3).Draw(t, "count"))
	}
	if rapid.Bool().Draw(t, "soft") {
		r.SoftLimit = rapid.Float64Range(0.01, 1).Draw(t, "soft-limit")
	}
	const span = int64(1) << 50
	switch r.Algorithm {
	case shed.TokenBucket:
		r.Limit = rapid.Int64Range(1, 100_000).Draw(t, "burst")
		r.Rate = ratelimit.Per(rapid.Int64Range(1, 1000).Draw(t, "count"), dur("per", 1e12))
		if rapid.Bool().Draw(t, "waits") {
			r.MaxWait = dur("max-wait", int64(time.Hour))
			r.QueueLength = rapid.IntRange(0, 1000).Draw(t, "queue")
		}
	case shed.SlidingLog:
		r.Limit = rapid.Int64Range(1, 1000).Draw(t, "limit")
		r.Window = dur("window", span)
	case shed.FixedWindow, shed.SlidingWindow:
		r.Limit = rapid.Int64Range(1, 1<<20).Draw(t, "limit")
		r.Calendar.Offset = time.Duration(rapid.IntRange(-14*60, 14*60).Draw(t, "zone-minutes")) * time.Minute
		if r.Calendar.Months = rapid.IntRange(-12, 12).Draw(t, "months"); r.Calendar.Months <= 0 {
			r.Calendar.Months = 0 // a window of a length, half the time
			r.Window = dur("window", span) + time.Millisecond
			if r.Algorithm == shed.FixedWindow && rapid.Bool().Draw(t, "window-waits") {
				r.MaxWait = dur("window-max-wait", int64(time.Hour))
				r.QueueLength = rapid.IntRange(0, 1000).Draw(t, "window-queue")
			}
		}
	case shed.Concurrency:
		r.Limit = rapid.Int64Range(1, 1<<20).Draw(t, "limit")
		if r.Identity == shed.Global {
			if rapid.Bool().Draw(t, "waits") {
				r.MaxWait = dur("max-wait", int64(time.Hour))
				r.QueueLength = rapid.IntRange(0, 1000).Draw(t, "queue")
				r.Queue = shed.Queue{Order: queueing.Order(rapid.IntRange(0, 2).Draw(t, "order")),
					CoDel: rapid.Bool().Draw(t, "codel"), DeadlineAware: rapid.Bool().Draw(t, "deadline-aware")}
				if rapid.Bool().Draw(t, "reserves") {
					r.Queue.Reserve = rapid.Float64Range(0.01, 0.99).Draw(t, "reserve")
				}
				r.Queue.FairShare = shed.Identity(rapid.IntRange(0, int(shed.Tenant)).Draw(t, "fair-share"))
			}
		} else {
			r.LeaseTTL = dur("lease", int64(time.Hour))
			// A key's leases take 64 bytes a permit at worst: within the
			// default byte budget at the capacities drawn below.
			r.Limit = rapid.Int64Range(1, 1000).Draw(t, "key-limit")
		}
	}
	if r.Identity != shed.Global {
		// Capacity 0 (the store's default) is covered by the seed files; small
		// tables keep the check fast.
		r.Capacity = rapid.IntRange(1, 100).Draw(t, "capacity")
		r.MaxBytes = int64(rapid.IntRange(0, 2).Draw(t, "max-bytes")) << 30 // 0: the default
		r.Failure = shed.FailureMode(rapid.IntRange(0, 1).Draw(t, "failure"))
		r.Overflow = concurrency.Overflow(rapid.IntRange(0, 1).Draw(t, "overflow"))
		if r.Identity == shed.IP {
			r.CGNATFactor = float64(rapid.IntRange(0, 20).Draw(t, "cgnat-factor")) // 0: the default, 1: off
			r.CGNATDefer = rapid.Bool().Draw(t, "cgnat-defer")
			if rapid.Bool().Draw(t, "by-prefix") {
				r.Overflow = shed.OverflowPrefix
				r.Prefix = shed.Prefix{IPv4: rapid.IntRange(0, 32).Draw(t, "prefix-v4"), IPv6: rapid.IntRange(0, 128).Draw(t, "prefix-v6"),
					Factor: float64(rapid.IntRange(0, 10).Draw(t, "prefix-factor"))}
			}
		}
	}
	return r
}

// Every rule the shed API builds is written in the format and read back
// equal, and the two rule sets build controllers with the same rules.
func TestRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 8).Draw(t, "rules")
		rules := make([]shed.Rule, n)
		for i := range rules {
			rules[i] = genRule(t, i)
		}
		var opts []shed.Option
		for _, r := range rules {
			if r.Tier != "" {
				opts = []shed.Option{shed.WithDefaultTier(r.Tier)} // FromRules' default: the first tier
				break
			}
		}
		c1, err := shed.New(rules, opts...)
		if err != nil {
			t.Skipf("shed rejects the drawn rules: %v", err) // rare: a window too short for its limit
		}
		defer c1.Close()
		f, err := policy.FromRules(rules)
		if err != nil {
			t.Fatal(err)
		}
		f.Categories = []policy.CategorySpec{{Name: "auth", Routes: []string{"POST /login"}}, {Name: "reports"}}
		doc, err := policy.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := policy.Parse("rt.json", doc)
		if err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		back, err := p.Rules()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(rules, back) {
			t.Fatalf("round trip changed the rules:\n%+v\n%+v\n%s", rules, back, doc)
		}
		c2, err := p.New()
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		if s1, s2 := c1.Stats().Rules, c2.Stats().Rules; !reflect.DeepEqual(s1, s2) {
			t.Fatalf("controllers differ:\n%+v\n%+v", s1, s2)
		}
		// The document is a fixed point of File -> JSON -> File.
		again, err := policy.Marshal(p.File())
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(doc) {
			t.Fatalf("re-marshalled document differs:\n%s\n%s", doc, again)
		}
	})
}

// An adaptive rule cannot be written from a Limiter; one described by the
// format builds, with a fresh limiter per call.
func TestAdaptiveRule(t *testing.T) {
	if _, err := policy.FromRules([]shed.Rule{{Name: "a", Algorithm: shed.Adaptive}}); err == nil {
		t.Fatal("FromRules accepted an adaptive rule")
	}
	p, err := policy.Parse("a.json", []byte(`{"version": 1, "rules": [
  {"name": "adaptive", "identity": "global", "algorithm": "adaptive", "max_wait": "10ms",
   "adaptive": {"algorithm": "gradient2", "initial_limit": 20, "min_limit": 5, "max_limit": 200}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	r1, err := p.Rules()
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := p.Rules()
	if r1[0].Limiter == nil || r1[0].Limiter == r2[0].Limiter {
		t.Fatal("each Rules call must build its own limiter")
	}
	c, err := p.New()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Stats().Rules[0].Limit; got != 20 {
		t.Fatalf("adaptive limit %d, want the initial 20", got)
	}
}

// A policy file chooses sluice's default algorithm and its scheduling
// signal; the signal means nothing to the other algorithms, and a bad
// value is an error.
func TestAdaptiveDefaultAlgorithm(t *testing.T) {
	doc := func(spec string) []byte {
		return []byte(`{"version": 1, "rules": [
  {"name": "adaptive", "identity": "global", "algorithm": "adaptive", "adaptive": ` + spec + `}]}`)
	}
	for _, spec := range []string{
		`{"algorithm": "default"}`,
		`{"algorithm": "default", "scheduling_target": "25ms", "min_limit": 2, "max_limit": 64}`,
		`{"algorithm": "default", "scheduling_target": "off"}`,
	} {
		p, err := policy.Parse("a.json", doc(spec))
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		rules, err := p.Rules()
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if rules[0].Limiter == nil {
			t.Fatalf("%s: no limiter", spec)
		}
	}
	for _, spec := range []string{
		`{"algorithm": "gradient2", "scheduling_target": "10ms"}`,
		`{"algorithm": "default", "scheduling_target": "0s"}`,
		`{"algorithm": "default", "scheduling_target": "-5ms"}`,
		`{"algorithm": "default", "scheduling_target": "soon"}`,
		`{"algorithm": "bbr"}`,
	} {
		if _, err := policy.Parse("a.json", doc(spec)); err == nil {
			t.Errorf("%s accepted", spec)
		} else if !strings.Contains(err.Error(), "adaptive") {
			t.Errorf("%s: error %q does not name the field", spec, err)
		}
	}
}
