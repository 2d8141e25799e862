package shed

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/sluicehq/sluice/store"
)

// MaxOverrides is the most overrides a Controller holds at once.
const MaxOverrides = 1024

// Override scales one client's limit of one per-key rule until an expiry:
// a tenant allowed ten times its quota for a migration week. The client
// counts on its own state at the scaled limit while the override lasts,
// and on the rule's state again after.
type Override struct {
	// Rule names a per-key rule (not Global).
	Rule string
	// Key is the client, as the rule's identity sees it: an IP address,
	// normalised and grouped as the middleware's resolver (WithResolver)
	// treats a client (an IPv4-mapped address is its IPv4 address, a zone
	// is dropped, and any address of an IPv6 /64 names that /64 by
	// default), a user id, an API key (raw; it is hashed here as for
	// requests) or a tenant id; for a Composite rule, the values of its
	// Key's parts in order, separated by '|' ("acme|gpt-4" for
	// Key{"tenant", "attr:model"}).
	Key string
	// Factor multiplies the rule's Limit and, for a token bucket, its
	// refill count; the scaled values are rounded up to whole requests.
	// It must be positive and finite.
	Factor float64
	// Until is when the override ends (wall clock).
	Until time.Time
}

// override is a compiled Override: the store limit at the scaled
// parameters and the end on the Controller's clock.
type override struct {
	id    store.LimitID
	until int64
}

// SetOverrides replaces the Controller's overrides with list (nil clears
// them); the store limits of scales no longer used are unregistered as
// Reload's are. It returns an error, keeping the overrides in force, for
// more than MaxOverrides, an unknown or Global rule, an empty key or one
// the rule's identity cannot have, a key that two overrides in force give
// for one rule, a factor that is not positive and finite, or scaled
// parameters the store rejects; the error of one override is an
// *OverrideError, which names it by its index in list and its rule, never
// by its key (which may be a secret).
// Overrides already expired are kept out. Safe for
// concurrent use with decisions, which see the old overrides or the new,
// never a mix.
func (c *Controller) SetOverrides(list []Override) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.set.Load()
	over, err := c.compileOverrides(cur, list)
	if err != nil {
		c.dropFresh()
		return err
	}
	next := *cur
	next.over, next.overrides = over, append([]Override(nil), list...)
	c.publish(&next)
	return nil
}

// compileOverrides builds the override tables of list against the rules
// of s: one map by store key per rule that has overrides.
func (c *Controller) compileOverrides(s *ruleSet, list []Override) ([]map[string]override, error) {
	if len(list) == 0 {
		return nil, nil
	}
	if len(list) > MaxOverrides {
		return nil, fmt.Errorf("shed: %d overrides, more than %d", len(list), MaxOverrides)
	}
	over := make([]map[string]override, len(s.rules))
	// at is the index in list of the override in force of each rule and
	// store key, so that a repeat names the first by its index; a raw API
	// key is never part of an error (see overrideError).
	at := make(map[overrideAt]int, len(list))
	for n, o := range list {
		i := -1
		for j := range s.rules {
			if s.rules[j].Name == o.Rule {
				i = j
			}
		}
		if i < 0 {
			return nil, overrideError(n, o, errors.New("unknown rule"))
		}
		r := &s.rules[i]
		if r.local() {
			return nil, overrideError(n, o, errors.New("a Global rule has no keys"))
		}
		if math.IsNaN(o.Factor) || math.IsInf(o.Factor, 0) || o.Factor <= 0 {
			return nil, overrideError(n, o, fmt.Errorf("factor must be positive and finite, got %v", o.Factor))
		}
		key, err := c.overrideKey(&r.Rule, o.Key)
		if err != nil {
			return nil, overrideError(n, o, err)
		}
		// Sub saturates, so a far expiry (past 2262) means never.
		until := int64(math.MaxInt64)
		if d := o.Until.Sub(time.Unix(0, c.wallAnchor)); d < time.Duration(math.MaxInt64-c.monoAnchor) {
			until = c.monoAnchor + int64(d)
		}
		if until <= c.now() {
			continue // expired already: it neither applies nor collides
		}
		if first, dup := at[overrideAt{i, key}]; dup {
			return nil, &OverrideError{Index: n, Rule: o.Rule, First: first, Err: ErrRepeatedKey}
		}
		at[overrideAt{i, key}] = n
		id, err := c.scaled(r, o.Factor, "override", 0)
		if err != nil {
			return nil, overrideError(n, o, err)
		}
		if over[i] == nil {
			over[i] = make(map[string]override)
		}
		over[i][key] = override{id: id, until: until}
	}
	return over, nil
}

// overrideAt is a rule (by index) and a store key of it.
type overrideAt struct {
	rule int
	key  string
}

// OverrideError is the error of one override of a list that SetOverrides
// or Reload rejects. It names the override by its index in the list and
// its rule, never by its key, which may be a raw API key (secrets never
// reach an error, and so a log line).
type OverrideError struct {
	// Index is the override's index in the list.
	Index int
	// Rule is the override's Rule.
	Rule string
	// First is, when the problem is that two overrides in force give one
	// key of one rule (two spellings of an address, two addresses of one
	// IPv6 group), the index of the first of them; -1 otherwise.
	First int
	// Err is the problem; ErrRepeatedKey when First is set.
	Err error
}

// ErrRepeatedKey is the problem of an override whose rule and key an
// earlier override in force gives too (see OverrideError.First).
var ErrRepeatedKey = errors.New("shed: the key of an override is given again")

// Error formats e as "shed: overrides[i] (rule "r"): problem".
func (e *OverrideError) Error() string {
	if e.First >= 0 {
		return fmt.Sprintf("shed: overrides[%d] (rule %q): the key of overrides[%d] is given again", e.Index, e.Rule, e.First)
	}
	return fmt.Sprintf("shed: overrides[%d] (rule %q): %v", e.Index, e.Rule, e.Err)
}

// Unwrap returns the problem.
func (e *OverrideError) Unwrap() error { return e.Err }

// overrideError is the error of list[n].
func overrideError(n int, o Override, err error) error {
	return &OverrideError{Index: n, Rule: o.Rule, First: -1, Err: err}
}

// overrideKey returns the store key of per-key rule r for value v, as
// buildKey (or buildComposite) makes it for a request.
func (c *Controller) overrideKey(r *Rule, v string) (string, error) {
	if v == "" {
		return "", errors.New("empty key")
	}
	switch id := r.Identity; id {
	case Composite:
		return c.compositeKey(r, v)
	case IP:
		// One address, nothing else (no port, brackets or prefix); then the
		// resolver the middleware uses normalises and groups it as it does
		// a request's peer, so that the key is the one requests build.
		if _, err := netip.ParseAddr(v); err != nil {
			return "", errors.New("key is not an IP address")
		}
		g := c.reading.res.Resolve(v, nil).Group
		if !g.IsValid() {
			return "", errors.New("key is not an IP address")
		}
		return string(appendIPKey(nil, g.Addr())), nil
	case User:
		return string(c.appendID([]byte("user:"), v)), nil
	case APIKey:
		return string(c.reading.hasher.AppendSumString([]byte("key:"), v)), nil
	case Tenant:
		return string(c.appendID([]byte("tenant:"), v)), nil
	}
	return "", fmt.Errorf("identity %v has no keys", r.Identity)
}

// scaled registers (once per distinct parameters and label) the store
// limit of r scaled by factor, named for what it serves (label), holding at
// most capacity keys (0: the rule's capacity). Limits of two labels are
// never one, even at equal parameters: each has a table of its own. Caller
// holds c.mu.
func (c *Controller) scaled(r *rule, factor float64, label string, capacity int) (store.LimitID, error) {
	spec, err := scaledSpec(&r.Rule, factor, capacity)
	if err != nil {
		return 0, err
	}
	spec.Name = r.Name + "#" + label // the key of scaledIDs; registered under named.Name
	if c.storage.scaledIDs == nil {
		c.storage.scaledIDs = make(map[store.Spec]store.LimitID)
	}
	if id, ok := c.storage.scaledIDs[spec]; ok {
		return id, nil
	}
	named := spec
	c.storage.storeN++
	named.Name = fmt.Sprintf("%s#%s-%d", r.Name, label, c.storage.storeN)
	id, err := c.register(named)
	if err != nil {
		return 0, err
	}
	c.storage.scaledIDs[spec] = id
	return id, nil
}

// scaledSpec returns the store limit of r with its Limit (and a token
// bucket's refill) times factor, rounded up, holding at most capacity
// keys (when positive and below r's own).
func scaledSpec(r *Rule, factor float64, capacity int) (store.Spec, error) {
	spec := r.spec()
	if capacity > 0 && (spec.Capacity == 0 || spec.Capacity > capacity) {
		spec.Capacity = capacity
	}
	up := func(v int64) (int64, error) {
		f := math.Ceil(float64(v) * factor)
		if f < 1 || f > math.MaxInt64/2 {
			return 0, fmt.Errorf("scaled limit %v out of range", f)
		}
		return int64(f), nil
	}
	var err error
	if spec.Limit, err = up(spec.Limit); err != nil {
		return spec, err
	}
	if spec.Algorithm == store.TokenBucket {
		if spec.Rate.Count, err = up(spec.Rate.Count); err != nil {
			return spec, err
		}
	}
	return spec, nil
}
