package shed

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/sluicehq/sluice/store"
)

// storeLimits are the store limits a Controller registered and has not
// unregistered yet (all under Controller.mu). They are unregistered when no
// rule set uses them any more (a Reload replaced a per-key rule,
// SetOverrides dropped an override's scale), when New, Reload or
// SetOverrides fails after registering some, and at Close, so that a shared
// store does not keep their key tables forever.
//
// A limit is retired when a publication replaces the last set using it, but
// it cannot be unregistered then: a decision loads the set in force once
// and calls the store with it a moment later, without a lock, so it may
// call the store after the set was replaced (even after several reloads, if
// it waited in a queue). Decisions are therefore counted by epoch: one
// enters (enter) before it loads the set, into the count of the epoch it
// read, and leaves after its store call. A publication tags what it retires
// with the epoch in force, and moves the epoch on only when no decision of
// the epoch before is left (so two counts, by the epoch's parity, do);
// then the limits retired before the epoch in force are unregistered.
// Every decision that could have loaded a set
// retired in epoch e entered in e or before, and has left by the time a
// publication of epoch e+1 finds none of e left. So a limit is unregistered
// one publication late when no decision spans a publication, later
// otherwise, and never under a decision that could still name it. (A
// decision that meets store.ErrUnknownLimit anyway, because Close ran or
// someone else unregistered the limit, takes it as a store error like any
// other: its rules' failure modes apply.)
type storeLimits struct {
	// owned is every one of them: what Close unregisters.
	owned map[store.LimitID]struct{}
	// retired are those no set in force uses, by the epoch they were
	// retired in.
	retired []retiredLimits
	// fresh are those the writer running now registered, unregistered
	// again if it fails (see dropFresh).
	fresh []store.LimitID
}

// retiredLimits are limits retired in epoch.
type retiredLimits struct {
	epoch uint64
	ids   []store.LimitID
}

// enter counts a decision about to load the rule set in force into its
// epoch's decisions; leave takes it out once its store call is done. An
// epoch's count lives in the attempt's counter shard: two atomic adds on a
// line the attempt writes anyway.
func (c *Controller) enter(a *ticket) {
	a.epoch = cDeciding + int(c.epoch.Load()&1)
	a.ctr[a.epoch].Add(1)
}

func (c *Controller) leave(a *ticket) { a.ctr[a.epoch].Add(-1) }

// load sets a.set to the rule set in force. A set with per-key rules is
// loaded after a entered its epoch, and load reports true: leave is due
// once a's store call is done. A set without any (ruleSet.stores) names
// no store limit, so a decision on it is not counted: no publication
// waits for it, and it pays no atomic add for the epoch.
func (c *Controller) load(a *ticket) bool {
	if s := c.set.Load(); !s.stores {
		a.set = s
		return false
	}
	c.enter(a)
	a.set = c.set.Load() // the set in force once counted: maybe another one
	return true
}

// storeIDs returns the store limits s uses: its per-key rules' and its
// overrides'.
func (s *ruleSet) storeIDs() map[store.LimitID]bool {
	ids := make(map[store.LimitID]bool)
	for i := range s.rules {
		if id := s.rules[i].id; id != 0 {
			ids[id] = true
		}
		if id := s.rules[i].cgnatID; id != 0 {
			ids[id] = true
		}
		if id := s.rules[i].suspectID; id != 0 {
			ids[id] = true
		}
		if id := s.rules[i].prefixID; id != 0 {
			ids[id] = true
		}
	}
	for _, m := range s.over {
		for _, o := range m {
			ids[o.id] = true
		}
	}
	return ids
}

// register registers spec with the store and records the limit as the
// Controller's. Caller holds c.mu.
func (c *Controller) register(spec store.Spec) (store.LimitID, error) {
	id, err := c.storage.store.Register(context.Background(), spec)
	if err != nil {
		return 0, err
	}
	if c.storage.limits.owned == nil {
		c.storage.limits.owned = make(map[store.LimitID]struct{})
	}
	c.storage.limits.owned[id] = struct{}{}
	c.storage.limits.fresh = append(c.storage.limits.fresh, id)
	return id, nil
}

// unregister unregisters ids from the store and forgets them. It returns
// those the store failed to drop, and the first of its errors; they stay
// owned, so that Close tries them again. A limit the store does not hold
// (store.ErrUnknownLimit) is gone already. Caller holds c.mu.
func (c *Controller) unregister(ids []store.LimitID) ([]store.LimitID, error) {
	var (
		left  []store.LimitID
		first error
	)
	for _, id := range ids {
		if err := c.storage.store.Unregister(context.Background(), id); err != nil && !errors.Is(err, store.ErrUnknownLimit) {
			left = append(left, id)
			if first == nil {
				first = err
			}
			continue
		}
		delete(c.storage.limits.owned, id)
		// Overrides of equal scale share a limit: a later one must
		// register a new one.
		maps.DeleteFunc(c.storage.scaledIDs, func(_ store.Spec, v store.LimitID) bool { return v == id })
	}
	return left, first
}

// publish puts next in force, retires the store limits that the set it
// replaces uses and next does not, and unregisters those retired before
// when no decision can name them any more (see storeLimits). Caller holds
// c.mu.
func (c *Controller) publish(next *ruleSet) {
	prev := c.set.Load()
	c.set.Store(next)
	c.storage.limits.fresh = c.storage.limits.fresh[:0]
	e := c.epoch.Load()
	used := next.storeIDs()
	for i := range c.storage.limits.retired {
		// An override's limit retired before and taken up again by next
		// (overrides of equal scale share one) is not retired any more.
		r := &c.storage.limits.retired[i]
		r.ids = slices.DeleteFunc(r.ids, func(id store.LimitID) bool { return used[id] })
	}
	if prev != nil {
		var ids []store.LimitID
		for id := range prev.storeIDs() {
			if !used[id] {
				ids = append(ids, id)
			}
		}
		if len(ids) > 0 {
			c.storage.limits.retired = append(c.storage.limits.retired, retiredLimits{epoch: e, ids: ids})
		}
	}
	if c.ctr.sum(cDeciding+int((e+1)&1)) != 0 {
		return // decisions of epoch e-1 are running: try at the next one
	}
	// Every decision that could have loaded a set older than the one
	// published in epoch e entered in epoch e-1 or before, and has left.
	var due, keep []retiredLimits
	for _, r := range c.storage.limits.retired {
		if r.epoch < e {
			due = append(due, r)
		} else {
			keep = append(keep, r)
		}
	}
	for _, r := range due {
		// Those the store fails to drop are due again next time.
		if left, _ := c.unregister(r.ids); len(left) > 0 {
			keep = append(keep, retiredLimits{epoch: r.epoch, ids: left})
		}
	}
	c.storage.limits.retired = keep
	c.epoch.Store(e + 1)
}

// dropFresh unregisters what a failing writer registered. Caller holds
// c.mu.
func (c *Controller) dropFresh() {
	fresh := c.storage.limits.fresh
	c.storage.limits.fresh = nil
	_, _ = c.unregister(fresh) // those left are owned: Close tries again
}

// unregisterAll unregisters every store limit the Controller holds,
// whatever decisions are running. It returns the first error of the store
// for those it failed to drop. Caller holds c.mu.
func (c *Controller) unregisterAll() error {
	ids := slices.Sorted(maps.Keys(c.storage.limits.owned))
	c.storage.limits.retired = nil
	_, err := c.unregister(ids)
	return err
}
