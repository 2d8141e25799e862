package shed

import (
	"log/slog"
	"strings"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// EarlyWarningBurst is the most early warnings passed to the hook in one
// second; the rest are counted (Stats.EarlyWarningsHeld) and dropped, so
// a flood of keys cannot flood a log.
const EarlyWarningBurst = 10

// EarlyWarning reports a key that passed half its limit within the first
// fifth of its window. Only FixedWindow and SlidingWindow rules raise it:
// their windows are aligned, so the time into the window follows from when
// the decision says the key recovers, on the deciding store's clock,
// without keeping anything per key (a token bucket or a sliding log has no
// window start). A key raises it at most once per window: on the decision that
// takes it past half. Memory: none per key.
type EarlyWarning struct {
	// Rule is the rule's name.
	Rule string
	// Key is the client's store key ("ip:198.51.100.7", "user:42",
	// "key:" and the API key's keyed hash, "tenant:acme"); "" for a
	// Global rule.
	Key string
	// Used and Limit are the key's use of the window after the decision,
	// and the rule's limit.
	Used, Limit int64
	// Elapsed is how far into its Window the key was.
	Elapsed, Window time.Duration
}

// earlyCheck raises an early warning when rd, an admitted decision of r
// (a window rule), took its key past half the limit early in the window.
func (c *Controller) earlyCheck(a *ticket, r *rule, key string, rd ratelimit.Decision) {
	if !pastHalf(rd, a.cost) {
		return // not the crossing
	}
	used := rd.Limit - rd.Remaining
	elapsed := windowElapsed(rd.ResetAfter, r.early)
	if elapsed*5 > r.early {
		return
	}
	r.ctr.add(a.shard, rEarly, 1)
	a.ctr[cEarly].Add(1)
	if ok, _ := c.answer.earlyG.Allow(a.now); !ok {
		a.ctr[cEarlyHeld].Add(1)
		return
	}
	w := EarlyWarning{Rule: r.Name, Key: strings.Clone(key), Used: used, Limit: rd.Limit,
		Elapsed: time.Duration(elapsed), Window: time.Duration(r.early)}
	if c.answer.early != nil {
		c.answer.early(w)
	}
	if ok, n := c.logs.early.Allow(a.now); ok {
		c.log.Warn("shed: key past half its limit early in its window", slog.String("rule", w.Rule),
			slog.String("key", w.Key), slog.Int64("used", w.Used), slog.Int64("limit", w.Limit),
			slog.Duration("elapsed", w.Elapsed), slog.Duration("window", w.Window), slog.Int64("suppressed", n))
	}
}

// pastHalf reports whether rd, an admission of cost, took its key past
// half its limit: the crossing that may raise an early warning. Callers
// on the hot path ask it first, to save the call of earlyCheck.
func pastHalf(rd ratelimit.Decision, cost int64) bool {
	used, half := rd.Limit-rd.Remaining, (rd.Limit+1)/2
	return used >= half && used-cost < half
}

// windowElapsed is how far into its window an admitted window decision
// (fixed or sliding) with resetAfter was, on the clock of whoever decided
// it: a network store decides on its server's clock, which this process
// does not share. A fixed window recovers at its end, so resetAfter is in
// (0, window]; a sliding window that counted in its current window
// recovers one window after that one ends, so it is in (window, 2·window].
func windowElapsed(resetAfter time.Duration, window int64) int64 {
	left := int64(resetAfter) % window // to the current window's end
	if left == 0 {
		return 0 // at its very start
	}
	return window - left
}
