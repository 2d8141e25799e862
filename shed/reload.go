package shed

import "net/http"

// Config is what Reload puts in force at once.
type Config struct {
	// Rules replace the Controller's rules (see New for their checks).
	Rules []Rule
	// Overrides replace the Controller's overrides (see SetOverrides).
	Overrides []Override
	// Category, when not nil, replaces the middleware's categorizer
	// (WithCategory) together with the rules that name its categories.
	Category func(*http.Request) string
	// TierWeights, when not nil, replaces the fair-share weights of tiers
	// (WithTierWeights); an empty map removes them.
	TierWeights map[string]int
}

// Reload puts cfg in force on a running Controller, atomically: every
// decision sees the old rule set or the new one whole (rules, overrides,
// categorizer, tier weights), never a mix, and the request path takes no lock and never
// waits for a reload.
//
// A rule equal to one in force (same name, every field equal; an
// adaptive rule with the same Limiter) keeps its state: its counters in
// Stats, its store limit and the keys' state there, its semaphore, queue
// and local rate state. A Global Concurrency rule whose limit alone changed
// keeps its semaphore, queue and counters under the new limit: the permits
// held count against it, so a lowered limit admits nothing new until fewer
// than it run. It keeps the kind of semaphore it was built with (sharded
// or one word, see Concurrency) even when the new limit would choose the
// other: the permits held go back to that one. A Global rate rule whose algorithm, window and calendar
// stay keeps what it counted under its new limit: a window its count, a
// sliding log its admissions, a token bucket its debt (the tokens owed,
// converted once at the reload when the rate changes, at most the new
// burst). A per-key rule whose Limit, Rate or LeaseTTL alone changed
// keeps its store limit, changed in place, when the store can do that
// (store.Updater: Memory can): every key keeps its usage, re-interpreted
// under the new parameters (a window keeps its count, a token bucket the
// tokens owed, a concurrency limit its leases; see store.Updater). Other new
// or changed rules start with fresh state (a changed per-key rule is
// registered with the store under a new name), and so does a rule whose
// store cannot read its state under the new parameters.
// Requests waiting in the queue of a rule that is removed or changed are
// shed (queueing.ErrClosed, 503); permits held under the old set are given
// back to it when their Tokens are done.
//
// The store limits that no rule or override in force uses any more are
// unregistered, freeing their keys' state, once no decision can still
// name them: at a later Reload or SetOverrides (the next one when no
// decision spans it), or at Close.
//
// Reload returns an error, and the rules in force stay (what it
// registered with the store is unregistered), for any problem New or
// SetOverrides would reject, and when the rules have tiers and the
// Controller's default tier (WithDefaultTier) is not among them. Safe for
// concurrent use; reloads are serialized.
func (c *Controller) Reload(cfg Config) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.set.Load()
	next, err := c.compile(cfg.Rules, cur, c.dryAll)
	if err != nil {
		c.dropFresh()
		return err
	}
	next.cat = cur.cat
	if cfg.Category != nil {
		next.cat = cfg.Category
	}
	next.weights = cur.weights
	if cfg.TierWeights != nil {
		if next.weights, err = tierWeights(cfg.TierWeights); err != nil {
			c.discard(next, cur)
			c.dropFresh()
			return err
		}
	}
	if next.over, err = c.compileOverrides(next, cfg.Overrides); err != nil {
		c.discard(next, cur)
		c.dropFresh()
		return err
	}
	next.overrides = append([]Override(nil), cfg.Overrides...)
	if err := c.applyUpdates(next, cur); err != nil {
		c.discard(next, cur)
		c.dropFresh()
		return err
	}
	c.publish(next)
	next.resize()
	c.discard(cur, next)
	return nil
}

// discard closes the queues of old that keep does not hold: their
// waiters are shed. Caller holds c.mu.
func (c *Controller) discard(old, keep *ruleSet) {
	for i := range old.rules {
		q := old.rules[i].queue
		if q == nil {
			continue
		}
		kept := false
		for j := range keep.rules {
			if keep.rules[j].queue == q {
				kept = true
				break
			}
		}
		if !kept {
			_ = q.Close()
		}
	}
}
