package shed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"

	"github.com/sluicehq/sluice/fingerprint"
	"github.com/sluicehq/sluice/penalty"
)

// SuspectCapacity bounds the keys a per-key rule keeps for tightened
// clients (they count on a store limit of their own, at the tightened
// parameters): suspects are few, or the threshold is too low.
const SuspectCapacity = 4096

// Suspicion tightens the limits of clients whose behaviour looks automated
// or abusive (WithSuspicion). For every request the middleware feeds the
// client's signals to Tracker, keyed on its client IP key: its
// User-Agent, the TLS fingerprint the connection's handshake left
// (fingerprint.ConnContext and CaptureTLS; none without TLS), and the
// caller's signals (Client.Signals: a failed CAPTCHA, a failed login).
// When the score is above Scale's threshold, the client's per-key rules
// decide it on tightened limits (the rule's Limit, and a token bucket's
// refill, times Scale's floor, rounded up): a quarter of the burst at a
// floor of 0.25. Tightened requests are counted (Stats.Tightened) and said
// in the Decision (Tightened, and the score's Reasons, never the raw
// signals); a rejection of a tightened client is a strike like any other,
// so penalties escalate. A tightened key counts on a state of its own:
// what it used before tightening is not carried over.
type Suspicion struct {
	// Tracker keeps each client's signals; required.
	Tracker *fingerprint.Tracker
	// Scale maps a score to a multiplier: 1 up to its threshold, its floor
	// at suspicion 1. Tightening applies the floor to every client above
	// the threshold (two levels: whole, or tightened). Required.
	Scale penalty.SuspicionScale
	// Demote caps the Priority of a tightened client's attempts at
	// Priority (Sheddable, say): Global Concurrency rules' queues and
	// Adaptive rules' limiters then serve it last and shed it first. A
	// client already below Priority keeps its own.
	Demote   bool
	Priority Priority
	// DryRun tightens nothing: a suspicious client is decided on its
	// normal limits (and priority), and what its tightened limits would
	// have rejected is counted (Stats.TightenedWouldReject,
	// RuleStats.TightenedWouldReject, Stats.DryRun), reported in
	// Decision.DryRun and logged, at most a line a second: to calibrate a
	// threshold before it acts. WithDryRun puts tightening in dry-run
	// too. The tightened limits are charged alongside the normal ones, as
	// if in force (rate rules only: a per-key Concurrency rule's
	// tightened permits are not taken).
	DryRun bool
}

// WithSuspicion feeds every request's signals to s.Tracker and tightens
// the per-key limits of suspicious clients (see Suspicion). It returns an
// error from New for a missing Tracker or a zero Scale.
func WithSuspicion(s Suspicion) Option {
	return optionFunc(func(c *config) error {
		if s.Tracker == nil {
			return errors.New("shed: WithSuspicion needs a Tracker")
		}
		if s.Scale.Floor() == 0 {
			return errors.New("shed: WithSuspicion needs a Scale (penalty.NewSuspicionScale)")
		}
		if s.Priority < Sheddable || s.Priority > CriticalPlus {
			return fmt.Errorf("shed: WithSuspicion: unknown priority %v", s.Priority)
		}
		if s.Priority != Critical && !s.Demote {
			return fmt.Errorf("shed: WithSuspicion: a priority (%v) without Demote", s.Priority)
		}
		c.suspicion = &suspicion{tracker: s.Tracker, floor: s.Scale.Floor(), threshold: s.Scale.Threshold(),
			demote: s.Demote, priority: s.Priority, dry: s.DryRun}
		return nil
	})
}

// suspicion is a compiled Suspicion.
type suspicion struct {
	tracker   *fingerprint.Tracker
	floor     float64 // the tightened multiplier
	threshold float64 // scores above it are tightened
	demote    bool
	priority  Priority // with demote: the cap of tightened attempts
	dry       bool     // Suspicion.DryRun (or WithDryRun: see tightenDry)
}

// observe feeds r's signals for a's client and marks a tightened when its
// score is above the threshold. a's IP key is built. With peek it reads
// the score r would get (fingerprint.Tracker.Score), recording and
// logging nothing.
func (c *Controller) observe(a *ticket, r *http.Request, signals []fingerprint.Signal, peek bool) {
	s := c.suspicion
	if !a.buildKey(IP) {
		return
	}
	obs := fingerprint.Observation{UserAgent: r.UserAgent(), Signals: signals}
	if fp, ok := fingerprint.TLSFromContext(r.Context()); ok {
		obs.TLS = fp.JA4
	}
	var (
		sc  fingerprint.Score
		err error
	)
	if peek {
		sc, err = s.tracker.Score(a.keyString(IP), obs)
	} else {
		sc, err = s.tracker.Observe(a.keyString(IP), obs, a.ask.Now)
	}
	if err != nil || !(sc.Value > s.threshold) || math.IsNaN(sc.Value) {
		return
	}
	a.ask.Tightened, a.ask.reasons = true, sc.Reasons
	if peek {
		return
	}
	if ok, n := c.logs.suspect.Allow(a.ask.Now); ok {
		msg := "shed: suspicious client, limits tightened"
		if s.dry || c.dryAll {
			msg = "shed: suspicious client, limits not tightened (dry run)"
		}
		c.log.Info(msg, slog.String("ip", a.ask.IP.String()),
			slog.Float64("score", sc.Value), slog.String("reasons", sc.Reasons.String()), slog.Int64("suppressed", n))
	}
}

// tighten applies WithSuspicion to a tightened attempt before its rules
// are decided: the demotion of its priority, unless tightening is in
// dry-run. It reports whether the per-key rules decide it on their
// tightened limits.
func (c *Controller) tighten(a *ticket) bool {
	s := c.suspicion
	if s.dry || c.dryAll {
		return false
	}
	if s.demote && a.ask.Priority > s.priority {
		a.ask.Priority = s.priority
	}
	return true
}

// shadowTightened decides, for an admitted attempt whose tightening is in
// dry-run, the tightened limits of its rate rules in a store call of their
// own (a.adj, free until the attempt is done), and counts, marks and logs
// a would-be rejection. The store gives back what a rejected call took; an
// admitted one stays charged, as the tightened limits would be in force.
// A failing store says nothing about tightening: it is ignored.
func (c *Controller) shadowTightened(ctx context.Context, a *ticket, d *Decision) {
	a.adj.N, a.adj.Now = 0, a.now
	var rules [len(a.hitRule)]int
	for j := range a.req.N {
		i := a.hitRule[j]
		r := &a.set.rules[i]
		if r.suspectID == 0 || !r.Algorithm.rate() {
			continue
		}
		rules[a.adj.N] = i
		a.adj.Add(r.suspectID, a.req.Hits[j].Key, a.req.Hits[j].Cost)
	}
	if a.adj.N == 0 {
		return
	}
	if err := c.storage.store.Decide(ctx, &a.adj, &a.adjRes); err != nil || a.adjRes.Allowed {
		return
	}
	i := rules[a.adjRes.Decider]
	r := &a.set.rules[i]
	r.ctr.add(a.shard, rTightenedWouldReject, 1)
	a.ctr[cTightenedWouldReject].Add(1)
	if !d.DryRun {
		d.DryRun, d.DryRunRule, d.DryRunKind = true, r.Name, OverLimit
		a.ctr[cDryRun].Add(1)
	}
	if ok, n := c.logs.tightenDry.Allow(a.now); ok {
		c.log.Info("shed: dry run, tightening would reject", slog.String("rule", r.Name),
			slog.String("reasons", a.ask.reasons.String()), slog.Int64("suppressed", n))
	}
}
