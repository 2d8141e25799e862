package shed

import (
	"errors"
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
		c.suspicion = &suspicion{tracker: s.Tracker, floor: s.Scale.Floor(), threshold: s.Scale.Threshold()}
		return nil
	})
}

// suspicion is a compiled Suspicion.
type suspicion struct {
	tracker   *fingerprint.Tracker
	floor     float64 // the tightened multiplier
	threshold float64 // scores above it are tightened
}

// observe feeds r's signals for a's client and marks a tightened when its
// score is above the threshold. a's IP key is built.
func (c *Controller) observe(a *ticket, r *http.Request, signals []fingerprint.Signal) {
	s := c.suspicion
	if !a.buildKey(IP) {
		return
	}
	obs := fingerprint.Observation{UserAgent: r.UserAgent(), Signals: signals}
	if fp, ok := fingerprint.TLSFromContext(r.Context()); ok {
		obs.TLS = fp.JA4
	}
	sc, err := s.tracker.Observe(a.keyString(IP), obs, a.ask.Now)
	if err != nil || !(sc.Value > s.threshold) || math.IsNaN(sc.Value) {
		return
	}
	a.ask.Tightened, a.ask.reasons = true, sc.Reasons
	if ok, n := c.logs.suspect.Allow(a.ask.Now); ok {
		c.log.Info("shed: suspicious client, limits tightened", slog.String("ip", a.ask.IP.String()),
			slog.Float64("score", sc.Value), slog.String("reasons", sc.Reasons.String()), slog.Int64("suppressed", n))
	}
}
