package shed

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/penalty"
	"github.com/sluicehq/sluice/store"
)

// MaxListed is the most keys per rule HotKeys reports, and the most
// clients Penalized reports.
const MaxListed = 100

// HotKey is one key of a per-key rule that uses much of it, as HotKeys
// reports it: named by its hash, never by the client's IP, user, API key
// or tenant.
type HotKey struct {
	// Rule is the rule's name.
	Rule string
	// Key is "h:" and the 16 hex digits of the key's hash in the store's
	// table of the rule (store.KeyUse.Hash): opaque, keyed with the
	// table's secret seed, so the same client has another hash in
	// another rule and in another process. ResetHash takes it back.
	Key string
	// Scope says which of the rule's store limits holds the key: "" for
	// the rule's own, "cgnat" for addresses in carrier-grade NAT ranges
	// (Rule.CGNATFactor), "tightened" for suspicious clients
	// (WithSuspicion), "prefix" for the network prefixes of addresses a
	// full table had no room for (OverflowPrefix).
	Scope string
	// Used, Limit and Remaining are the key's use of the rule at the time
	// of the call (Used = Limit - Remaining; a Concurrency rule's permits
	// held).
	Used, Limit, Remaining int64
	// ResetAfter is the time until the key is whole again.
	ResetAfter time.Duration
}

// HotKeys returns, for each per-key rule in force, in the rules' order,
// the keys that use the most of it, most used first (a key using nothing
// is left out): at most n of each of the rule's store limits (its own,
// and those of CGNAT addresses and of tightened clients, HotKey.Scope;
// the few keys under an override, SetOverrides, are not listed). The keys are read from the store's tables at
// the time of the call (store.KeyLister: Memory is one); deciding keeps
// nothing for it, so it costs decisions nothing, and a call costs time in
// proportion to the rules' capacities (store.Memory.TopKeys: about 1.6 ms
// per rule of the default capacity). With a store that cannot list its keys (redisstore)
// it returns no keys and an error saying so. It returns an error for n
// outside [1, MaxListed]. Safe for concurrent use.
func (c *Controller) HotKeys(n int) ([]HotKey, error) {
	if n < 1 || n > MaxListed {
		return nil, fmt.Errorf("shed: HotKeys of %d keys: want 1 to %d", n, MaxListed)
	}
	kl, ok := c.storage.store.(store.KeyLister)
	if !ok {
		return nil, fmt.Errorf("shed: HotKeys: the store (%T) cannot list its keys", c.storage.store)
	}
	now := c.now()
	s := c.set.Load()
	var out []HotKey
	for i := range s.rules {
		r := &s.rules[i]
		for _, l := range r.keyLimits() {
			top, err := kl.TopKeys(l.id, n, now)
			if err != nil {
				return out, fmt.Errorf("shed: HotKeys: rule %q: %w", r.Name, err)
			}
			for _, u := range top {
				out = append(out, HotKey{Rule: r.Name, Key: hashKey(u.Hash), Scope: l.scope,
					Used: u.Used, Limit: u.Limit, Remaining: u.Remaining, ResetAfter: u.ResetAfter})
			}
		}
	}
	return out, nil
}

// scopedLimit is one of a per-key rule's store limits.
type scopedLimit struct {
	id    store.LimitID
	scope string
}

// keyLimits returns the store limits of a per-key rule's keys (none for a
// Global rule): its own, then those of CGNAT addresses and of tightened
// clients.
func (r *rule) keyLimits() []scopedLimit {
	if r.local() || r.id == 0 {
		return nil
	}
	ls := []scopedLimit{{r.id, ""}}
	if r.cgnatID != 0 {
		ls = append(ls, scopedLimit{r.cgnatID, "cgnat"})
	}
	if r.suspectID != 0 {
		ls = append(ls, scopedLimit{r.suspectID, "tightened"})
	}
	if r.prefixID != 0 {
		ls = append(ls, scopedLimit{r.prefixID, "prefix"})
	}
	return ls
}

// PenalizedClient is one client serving a penalty timeout, as Penalized
// reports it.
type PenalizedClient struct {
	// Key is "h:" and the 16 hex digits of the client's hash in the
	// penalty box's table (penalty.Penalty.Hash): opaque, never the
	// client's identity. PardonHash takes it back.
	Key string
	// Left is the time left on the timeout.
	Left time.Duration
	// Level is the escalation level in force (1 during the first timeout).
	Level int
	// Strikes is the client's strikes within the box's window (those
	// that started the timeout are consumed by it: usually 0).
	Strikes int
}

// penaltyLister is what penalty.Box offers beyond Penalties to list and
// pardon its clients by hash.
type penaltyLister interface {
	Penalized(n int, now int64) ([]penalty.Penalty, error)
	PardonHash(hash uint64) bool
}

var _ penaltyLister = (*penalty.Box)(nil)

// Penalized returns at most n clients serving a penalty timeout
// (WithPenalties), the longest time left first, read from the box at the
// time of the call (penalty.Box.Penalized: decisions keep nothing for
// it). It returns an error for n outside [1, MaxListed], and when the
// Controller has no penalties or its box cannot list them. Safe for
// concurrent use.
func (c *Controller) Penalized(n int) ([]PenalizedClient, error) {
	if n < 1 || n > MaxListed {
		return nil, fmt.Errorf("shed: Penalized of %d clients: want 1 to %d", n, MaxListed)
	}
	pl, err := c.penaltyLister("Penalized")
	if err != nil {
		return nil, err
	}
	ps, err := pl.Penalized(n, c.now())
	if err != nil {
		return nil, fmt.Errorf("shed: Penalized: %w", err)
	}
	out := make([]PenalizedClient, len(ps))
	for i, p := range ps {
		out[i] = PenalizedClient{Key: hashKey(p.Hash), Left: p.Left, Level: p.Level, Strikes: p.Strikes}
	}
	return out, nil
}

func (c *Controller) penaltyLister(op string) (penaltyLister, error) {
	if c.pen == nil {
		return nil, fmt.Errorf("shed: %s: the Controller has no penalties (WithPenalties)", op)
	}
	pl, ok := c.pen.(penaltyLister)
	if !ok {
		return nil, fmt.Errorf("shed: %s: the penalty box (%T) cannot list its clients by hash", op, c.pen)
	}
	return pl, nil
}

// PardonHash is Pardon for a client named by its hashed key
// (PenalizedClient.Key). It reports whether the box held the client, and
// returns an error for a key that is not "h:" and 16 hex digits, and as
// Penalized does.
func (c *Controller) PardonHash(key string) (bool, error) {
	h, err := parseHashKey(key)
	if err != nil {
		return false, fmt.Errorf("shed: PardonHash: %w", err)
	}
	pl, err := c.penaltyLister("PardonHash")
	if err != nil {
		return false, err
	}
	return pl.PardonHash(h), nil
}

// ResetHash is ResetKey for a key named by its hashed key (HotKey.Key):
// it forgets that key's usage of rule name, in each of the rule's store
// limits (HotKey.Scope) that has the hash. It returns an error for a key
// that is not "h:" and 16 hex digits, an unknown or Global rule, a store
// that cannot reset by hash (store.KeyLister), and the store's error.
func (c *Controller) ResetHash(ctx context.Context, name, key string) error {
	h, err := parseHashKey(key)
	if err != nil {
		return fmt.Errorf("shed: ResetHash: %w", err)
	}
	kl, ok := c.storage.store.(store.KeyLister)
	if !ok {
		return fmt.Errorf("shed: ResetHash: the store (%T) cannot reset a key by hash", c.storage.store)
	}
	s := c.set.Load()
	for i := range s.rules {
		r := &s.rules[i]
		if r.Name != name {
			continue
		}
		ls := r.keyLimits()
		if len(ls) == 0 {
			return fmt.Errorf("shed: ResetHash: rule %q is Global: it has no keys", name)
		}
		for _, l := range ls {
			err = errors.Join(err, kl.ResetHash(ctx, l.id, h))
		}
		if err != nil {
			return fmt.Errorf("shed: ResetHash: rule %q: %w", name, err)
		}
		return nil
	}
	return fmt.Errorf("shed: ResetHash: no rule %q", name)
}

// hashKey formats a table hash as a hashed key: "h:" and 16 hex digits.
func hashKey(h uint64) string {
	s := strconv.FormatUint(h, 16)
	return "h:" + strings.Repeat("0", 16-len(s)) + s
}

// parseHashKey reads a hashed key of hashKey.
func parseHashKey(key string) (uint64, error) {
	hex, ok := strings.CutPrefix(key, "h:")
	if !ok || len(hex) != 16 {
		return 0, errors.New(`a hashed key is "h:" and 16 hex digits`)
	}
	h, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return 0, errors.New(`a hashed key is "h:" and 16 hex digits`)
	}
	return h, nil
}
