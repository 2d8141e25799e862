package shed

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/fingerprint"
	"github.com/sluicehq/sluice/penalty"
	"github.com/sluicehq/sluice/ratelimit"
)

// noAgentSuspicion is a Suspicion under which a request without a
// User-Agent is suspicious and its limits a quarter of the normal.
func noAgentSuspicion(t *testing.T) Suspicion {
	t.Helper()
	tracker, err := fingerprint.NewTracker(1024, fingerprint.WithWeights(fingerprint.Weights{NoAgent: 0.9}))
	if err != nil {
		t.Fatal(err)
	}
	scale, err := penalty.NewSuspicionScale(0.5, 0.25)
	if err != nil {
		t.Fatal(err)
	}
	return Suspicion{Tracker: tracker, Scale: scale}
}

// TestTighteningDryRunCountsWhatItWouldReject: with tightening in
// dry-run, a suspicious client keeps its whole burst, and the requests
// its tightened burst (a quarter) would have rejected are counted, marked
// in the Decision and logged, at most a line a second.
func TestTighteningDryRunCountsWhatItWouldReject(t *testing.T) {
	for _, mode := range []string{"suspicion", "controller"} {
		t.Run(mode, func(t *testing.T) {
			s := noAgentSuspicion(t)
			opts := []Option{}
			if mode == "suspicion" {
				s.DryRun = true
			} else {
				opts = append(opts, WithDryRun())
			}
			var logs bytes.Buffer
			marked := 0 // decisions marked as would-be rejections of the rule
			c, h, _ := newTest(t, []Rule{{Name: "burst", Identity: IP, Algorithm: TokenBucket, Limit: 8, Rate: ratelimit.Per(1, time.Hour)}},
				append(opts, WithSuspicion(s), WithDecisionHook(func(d Decision) {
					if d.Tightened && d.DryRun && d.DryRunRule == "burst" && d.Allowed {
						marked++
					}
				}),
					WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))...)
			admitted := 0
			for range 12 {
				if w := send(h, "192.0.2.2"); w.Code == http.StatusOK {
					admitted++
				}
			}
			st := c.Stats()
			// 2 of the first 8 fit the tightened burst; past 8 the normal
			// burst rejects (or, in dry-run, would: RuleStats.WouldReject).
			wantAdmitted, wantShadow, wantMarked := 8, uint64(6), 6
			if mode == "controller" {
				wantAdmitted, wantMarked = 12, 10 // the rule itself is in dry-run too
			}
			if admitted != wantAdmitted {
				t.Fatalf("admitted %d of 12, want %d: tightening acted in dry-run", admitted, wantAdmitted)
			}
			if st.TightenedWouldReject != wantShadow || st.Rules[0].TightenedWouldReject != wantShadow {
				t.Fatalf("TightenedWouldReject %d (rule %d), want %d", st.TightenedWouldReject, st.Rules[0].TightenedWouldReject, wantShadow)
			}
			if st.Tightened != 12 || marked != wantMarked {
				t.Fatalf("Tightened %d, want 12; %d admitted decisions marked DryRun by the rule, want %d", st.Tightened, marked, wantMarked)
			}
			if n := strings.Count(logs.String(), "tightening would reject"); n != 1 {
				t.Fatalf("%d log lines of would-be tightened rejections in one second, want 1:\n%s", n, logs.String())
			}
			// An ordinary client is not shadowed.
			for range 8 {
				send(h, "192.0.2.1", func(r *http.Request) { r.Header.Set("User-Agent", "Mozilla/5.0") })
			}
			if got := c.Stats().TightenedWouldReject; got != wantShadow {
				t.Fatalf("an ordinary client moved TightenedWouldReject to %d", got)
			}
		})
	}
}

// TestSuspicionDemotesToALowerPriority: with Demote, a tightened client's
// attempts queue for a Global Concurrency rule as Sheddable, so they stay
// out of the share reserved for critical work; without it they use it.
func TestSuspicionDemotesToALowerPriority(t *testing.T) {
	for _, demote := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			s := noAgentSuspicion(t)
			if demote {
				s.Demote, s.Priority = true, Sheddable
			}
			c, err := New([]Rule{{Name: "inflight", Algorithm: Concurrency, Limit: 4, MaxWait: 10 * time.Millisecond,
				Queue: Queue{Reserve: 0.5}}}, WithSuspicion(s), quiet())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var held []Token
			admitted := 0
			for range 3 {
				d, tok, err := c.Decide(context.Background(), Attempt{Tightened: true})
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admitted++
					held = append(held, tok)
				}
			}
			want := 3
			if demote {
				want = 2 // the other half of the limit is the reserve
			}
			if admitted != want {
				t.Fatalf("demote %v: %d tightened attempts admitted of 3, want %d", demote, admitted, want)
			}
			if d, tok, err := c.Decide(context.Background(), Attempt{}); err != nil || !d.Allowed {
				t.Fatalf("demote %v: a critical attempt: %+v %v", demote, d, err)
			} else {
				held = append(held, tok)
			}
			for _, tok := range held {
				tok.Done(Success)
			}
		})
	}
	if _, err := New([]Rule{{Name: "g", Algorithm: Concurrency, Limit: 1}},
		WithSuspicion(Suspicion{Tracker: noAgentSuspicion(t).Tracker, Scale: noAgentSuspicion(t).Scale, Priority: Sheddable}), quiet()); err == nil {
		t.Error("a priority without Demote was accepted")
	}
}
