package shed

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"pgregory.net/rapid"
)

// nopObserver observes nothing. A Controller with an Observer decides
// every attempt on the general path (see plain).
type nopObserver struct{}

func (nopObserver) ObserveQueueWait(string, time.Duration, bool) {}
func (nopObserver) ObserveDecision(Kind, time.Duration)          {}

// drawGlobalRules draws one to four Global rules that never wait (a plan
// of them is local): rate rules of every algorithm and concurrency
// rules, of small limits, some in dry-run, counting some statuses,
// of a category or a tier. scale multiplies every limit (a reload).
func drawGlobalRules(t *rapid.T, scale int64) ([]Rule, string) {
	n := rapid.IntRange(1, 4).Draw(t, "rules")
	rules := make([]Rule, n)
	def := ""
	for i := range rules {
		r := Rule{
			Name:      fmt.Sprintf("r%d", i),
			Algorithm: rapid.SampledFrom([]Algorithm{TokenBucket, FixedWindow, SlidingWindow, SlidingLog, Concurrency}).Draw(t, "algorithm"),
			Limit:     rapid.Int64Range(1, 4).Draw(t, "limit") * scale,
			DryRun:    rapid.Bool().Draw(t, "dry"),
			Category:  rapid.SampledFrom([]string{"", "", "read", "write"}).Draw(t, "category"),
			Tier:      rapid.SampledFrom([]string{"", "", "gold", "free"}).Draw(t, "tier"),
		}
		switch r.Algorithm {
		case TokenBucket:
			r.Rate = ratelimit.Per(2, time.Second)
		case Concurrency:
		default:
			r.Window = time.Second
		}
		if r.Algorithm != Concurrency {
			r.Count = rapid.SampledFrom([]Count{CountAll, CountAll, CountFailures, CountAuthFailures}).Draw(t, "count")
		}
		if def == "" {
			def = r.Tier
		}
		rules[i] = r
	}
	return rules, def
}

// comparable returns d without what differs between two Controllers that
// decide alike: its plan (their own) and its wall time, which is anchored
// at each one's start (reported relative to it). The decision of an error
// has neither.
func comparable(c *Controller, d Decision) Decision {
	if d.plan != nil {
		d.plan, d.wall = nil, d.wall-c.wallAnchor
	}
	return d
}

// TestPlainDecisionsEqualTheGeneralPath: decidePlain, the short path of
// Decide for plain attempts on plans of Global rules, decides exactly as
// decide does. Two Controllers on one clock and one history of attempts
// (valid and not, of any category, tier, cost, now, priority and weight),
// completions (Done, twice or not, DoneStatus, Recost), clock moves and
// reloads, one of them with an Observer (which sends every attempt down
// the general path), give the same decisions and errors, the same
// decisions to their hooks, the same early warnings and the same Stats.
func TestPlainDecisionsEqualTheGeneralPath(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rules, def := drawGlobalRules(t, 1)
		clk := newFakeClock()
		type side struct {
			c     *Controller
			hooks []Decision
			early []EarlyWarning
			toks  []Token
		}
		var sides [2]*side
		for k := range sides {
			s := &side{}
			opts := []Option{WithClock(clk.now), quiet(),
				WithDecisionHook(func(d Decision) { s.hooks = append(s.hooks, d) }),
				WithEarlyWarning(func(w EarlyWarning) { s.early = append(s.early, w) })}
			if def != "" {
				opts = append(opts, WithDefaultTier(def))
			}
			if k == 1 {
				opts = append(opts, WithObserver(nopObserver{}))
			}
			c, err := New(rules, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			s.c = c
			sides[k] = s
		}
		plain, general := sides[0], sides[1]
		if p := plain.c.set.Load().planFor("", def); !p.local {
			t.Fatal("a plan of Global rules that never wait is not local")
		}
		for range rapid.IntRange(1, 80).Draw(t, "steps") {
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op < 5:
				a := Attempt{
					Category: rapid.SampledFrom([]string{"", "read", "write", "other"}).Draw(t, "cat"),
					Tier:     rapid.SampledFrom([]string{"", "gold", "free", "other"}).Draw(t, "atier"),
					Cost:     rapid.Int64Range(-1, 3).Draw(t, "cost"),
					Priority: Priority(rapid.IntRange(int(Sheddable)-1, int(CriticalPlus)+1).Draw(t, "priority")),
					Weight:   rapid.SampledFrom([]int{0, 0, 1, -1, MaxWeight + 1}).Draw(t, "weight"),
				}
				switch rapid.IntRange(0, 5).Draw(t, "now") {
				case 0:
					a.Now = clk.now()
				case 1:
					a.Now = -1
				}
				var ds [2]Decision
				var errs [2]error
				for k, s := range sides {
					d, tok, err := s.c.Decide(context.Background(), a)
					if d.Allowed && err == nil {
						s.toks = append(s.toks, tok)
					} else if tok != (Token{}) {
						t.Fatalf("a rejection or an error came with a token: %+v, %v", d, err)
					}
					ds[k], errs[k] = comparable(s.c, d), err
				}
				if fmt.Sprint(errs[0]) != fmt.Sprint(errs[1]) || !reflect.DeepEqual(ds[0], ds[1]) {
					t.Fatalf("%+v:\nplain   %+v, %v\ngeneral %+v, %v", a, ds[0], errs[0], ds[1], errs[1])
				}
			case op < 8:
				if len(plain.toks) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(plain.toks)-1).Draw(t, "tok")
				how := rapid.IntRange(0, 3).Draw(t, "how")
				status := rapid.SampledFrom([]int{200, 401, 404, 503}).Draw(t, "status")
				actual := rapid.Int64Range(0, 4).Draw(t, "actual")
				twice := rapid.Bool().Draw(t, "twice")
				for _, s := range sides {
					tok := s.toks[i]
					switch how {
					case 0:
						tok.Done(Success)
					case 1:
						tok.DoneStatus(status)
					case 2:
						_ = tok.Recost(actual)
						tok.DoneStatus(status)
					case 3:
						tok.DoneAt(clk.now(), Dropped)
					}
					if twice {
						tok.Done(Success)
					}
					s.toks = append(s.toks[:i], s.toks[i+1:]...)
				}
			case op < 9:
				clk.add(time.Duration(rapid.IntRange(1, 1500).Draw(t, "ms")) * time.Millisecond)
			default:
				scale := rapid.Int64Range(1, 3).Draw(t, "scale")
				next, _ := drawGlobalRules(t, scale)
				// The same rules at a new scale, so that tiers and
				// categories stay valid; the drawn ones lend their limits.
				reload := make([]Rule, len(rules))
				for i := range rules {
					reload[i] = rules[i]
					reload[i].Limit = next[i%len(next)].Limit
				}
				for _, s := range sides {
					if err := s.c.Reload(Config{Rules: reload}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if a, b := plain.c.Stats(), general.c.Stats(); !reflect.DeepEqual(a, b) {
				t.Fatalf("stats differ:\nplain   %+v\ngeneral %+v", a, b)
			}
		}
		if len(plain.hooks) != len(general.hooks) || len(plain.early) != len(general.early) {
			t.Fatalf("hooks %d/%d, early warnings %d/%d", len(plain.hooks), len(general.hooks), len(plain.early), len(general.early))
		}
		for i := range plain.hooks {
			if a, b := comparable(plain.c, plain.hooks[i]), comparable(general.c, general.hooks[i]); !reflect.DeepEqual(a, b) {
				t.Fatalf("hook %d: plain %+v, general %+v", i, a, b)
			}
		}
		if !reflect.DeepEqual(plain.early, general.early) {
			t.Fatalf("early warnings: plain %+v, general %+v", plain.early, general.early)
		}
	})
}

// TestNegativeClockIsAnErrorOnGlobalRules: on a Controller of Global
// rules, a clock that reads below zero makes Decide's error, as on any
// other rules, and admits nothing.
func TestNegativeClockIsAnErrorOnGlobalRules(t *testing.T) {
	c, err := New([]Rule{{Name: "global", Algorithm: TokenBucket, Limit: 10, Rate: ratelimit.Per(1, time.Second)},
		{Name: "inflight", Algorithm: Concurrency, Limit: 10}},
		WithClock(func() int64 { return -3 }), quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, tok, err := c.Decide(context.Background(), Attempt{})
	if err == nil || !strings.HasPrefix(err.Error(), "shed: negative now -3") || d.Allowed || tok != (Token{}) {
		t.Fatalf("Decide on a negative clock: %+v, %v", d, err)
	}
	if s := c.Stats(); s.Admitted != 0 || s.Inflight != 0 {
		t.Fatalf("%+v", s)
	}
}
