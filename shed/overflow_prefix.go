package shed

import (
	"log/slog"
	"math"
	"unsafe"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// OverflowPrefix is the Rule.Overflow of an IP rule (only) that decides a
// new client address its full key table has no room for on a second,
// bounded limit keyed on the address's network prefix (Rule.Prefix): an
// IPv4 /24 or an IPv6 /48 by default, at the rule's parameters with the
// Limit (and a token bucket's refill) multiplied by the prefix factor.
//
// A key flood from one network then spends only its own prefix's limit,
// and newcomers from other networks are served while the flood holds the
// table: the table still evicts only keys indistinguishable from fresh
// ones, and no limited client is reset. A client address decided on its
// prefix is the server's condition, not the client's: a prefix over its
// limit is a 503 whose Retry-After is when the prefix has room again,
// never a 429 and never a penalty strike. When the prefix table is full
// too (PrefixCapacity keys, or the rule's smaller Capacity), the answer is
// OverflowReject's: 503 with a short Retry-After.
//
// Only the rule's own limit overflows to a prefix: a client decided on a
// scaled limit (a CGNAT address, a tightened client, an override) whose
// table is full gets OverflowReject's answer. Such decisions are counted
// in RuleStats.Overflowed and RuleStats.OverflowPrefix, and logged at most
// once a second.
//
// In any window of the rule, one address is admitted at most Limit times
// on its own key plus what its prefix's limit has left, and no prefix's
// limit admits more than ceil(Limit·Factor) however many of its addresses
// overflow. A store without a table of keys (a network store) never
// overflows, so there the prefix limit is never used.
const OverflowPrefix = concurrency.OverflowShare + 1

// DefaultPrefixIPv4 and DefaultPrefixIPv6 are the prefix lengths of
// OverflowPrefix when Prefix.IPv4 or Prefix.IPv6 is zero: an IPv4 /24, an
// IPv6 /48 (a site; one host holds at least a /64).
const (
	DefaultPrefixIPv4 = 24
	DefaultPrefixIPv6 = 48
)

// DefaultPrefixFactor multiplies an IP rule's Limit for one prefix's limit
// under OverflowPrefix when Prefix.Factor is zero: a prefix stands for a
// few clients who come while a flood holds the table.
const DefaultPrefixFactor = 4

// PrefixCapacity bounds the keys of a rule's prefix limit (OverflowPrefix):
// the networks it serves while its table is full. A smaller Capacity of
// the rule wins.
const PrefixCapacity = 4096

// Prefix is the network prefix limit of an IP rule whose Overflow is
// OverflowPrefix; the zero value is the defaults (a /24, a /48, a factor
// of DefaultPrefixFactor). Any other rule must leave it zero.
type Prefix struct {
	// IPv4 is the prefix length of IPv4 addresses, in [1, 32]; zero
	// means DefaultPrefixIPv4.
	IPv4 int
	// IPv6 is the prefix length of IPv6 addresses, in [1, 128]; zero
	// means DefaultPrefixIPv6. The middleware keys IPv6 clients per
	// group (a /64 by default), so a longer prefix is one group.
	IPv6 int
	// Factor multiplies the rule's Limit (and a token bucket's refill) for
	// one prefix's limit: positive and finite; zero means
	// DefaultPrefixFactor.
	Factor float64
}

// validatePrefix checks the rule's overflow policy and prefix.
func (r *Rule) validatePrefix() error {
	p := r.Prefix
	switch {
	case r.Overflow > OverflowPrefix:
		return r.errorf("unknown overflow policy %d", r.Overflow)
	case r.Overflow == OverflowPrefix && r.Identity != IP:
		return r.errorf("overflow by prefix applies only to %v rules, not %v", IP, r.Identity)
	case p != Prefix{} && r.Overflow != OverflowPrefix:
		return r.errorf("a prefix applies only to a rule whose overflow is by prefix")
	case p.IPv4 < 0 || p.IPv4 > 32:
		return r.errorf("an IPv4 prefix must be 1 to 32 bits (or 0 for %d), got %d", DefaultPrefixIPv4, p.IPv4)
	case p.IPv6 < 0 || p.IPv6 > 128:
		return r.errorf("an IPv6 prefix must be 1 to 128 bits (or 0 for %d), got %d", DefaultPrefixIPv6, p.IPv6)
	case math.IsNaN(p.Factor) || math.IsInf(p.Factor, 0) || p.Factor < 0:
		return r.errorf("a prefix factor must be positive and finite (or 0 for %d), got %v", DefaultPrefixFactor, p.Factor)
	}
	return nil
}

// storeOverflow is the overflow policy of the rule's store limits: a prefix
// overflow is a rejection the Controller decides again on the prefix.
func (r *Rule) storeOverflow() concurrency.Overflow {
	if r.Overflow == OverflowPrefix {
		return concurrency.OverflowReject
	}
	return r.Overflow
}

// prefixFactor returns the factor of the rule's prefix limit.
func (r *Rule) prefixFactor() float64 {
	if r.Prefix.Factor == 0 {
		return DefaultPrefixFactor
	}
	return r.Prefix.Factor
}

// prefixBits returns the prefix lengths of the rule's prefix limit.
func (r *Rule) prefixBits() (v4, v6 int) {
	v4, v6 = r.Prefix.IPv4, r.Prefix.IPv6
	if v4 == 0 {
		v4 = DefaultPrefixIPv4
	}
	if v6 == 0 {
		v6 = DefaultPrefixIPv6
	}
	return v4, v6
}

// maxPrefixKey is the longest prefix key: "net:", an IPv6 address in full
// and "/128".
const maxPrefixKey = len("net:") + len("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128")

// prefixKey builds in a.pfx the store key of the attempt's address prefix
// under rule r ("net:" and the masked prefix, such as "net:192.0.2.0/24")
// and returns it as a string over a.pfx (see keyString for why it may). It
// reports false for an attempt without a valid address.
func (a *ticket) prefixKey(r *rule) (string, bool) {
	ip := a.ask.IP.Unmap() // an IPv4-mapped address is counted in its IPv4 prefix
	if !ip.IsValid() {
		return "", false
	}
	v4, v6 := r.prefixBits()
	bits := v6
	if ip.Is4() {
		bits = v4
	}
	p, err := ip.Prefix(bits)
	if err != nil { // cannot happen: bits were validated for each family
		return "", false
	}
	b := p.AppendTo(append(a.pfx[:0], "net:"...))
	if len(b) > len(a.pfx) || &b[0] != &a.pfx[0] { // cannot happen: the array fits the longest
		return "", false
	}
	return unsafe.String(&b[0], len(b)), true
}

// overflowToPrefix moves hit h, of rule i, whose key did not fit the rule's
// full table, to the rule's prefix limit, and reports whether it did: the
// hit must be on the rule's own limit, and the attempt have an address.
func (c *Controller) overflowToPrefix(a *ticket, h, i int) bool {
	r := &a.set.rules[i]
	if !a.toPrefix(r, h) {
		return false
	}
	r.ctr.add(a.shard, rOverflowed, 1)
	r.ctr.add(a.shard, rOverflowPrefix, 1)
	c.logPrefix(a.now, r.Name, a.req.Hits[h].Key)
	return true
}

// toPrefix moves hit h of the attempt's store request, of rule r, to r's
// prefix limit and the address's prefix key, and reports whether it did
// (not when r has no prefix limit, the hit is on it already, or the
// address has no prefix key): overflowToPrefix without counting or
// logging, for a peek too.
func (a *ticket) toPrefix(r *rule, h int) bool {
	hit := &a.req.Hits[h]
	if r.prefixID == 0 || hit.Limit != r.id {
		return false
	}
	key, ok := a.prefixKey(r)
	if !ok {
		return false
	}
	hit.Limit, hit.Key = r.prefixID, key
	return true
}

// onPrefix reports whether hit h of the attempt's store request is on the
// prefix limit of rule r.
func (a *ticket) onPrefix(r *rule, h int) bool {
	return r.prefixID != 0 && a.req.Hits[h].Limit == r.prefixID
}

// shedPrefix rejects a for rule i, whose prefix limit is spent: the
// server's condition (the client's network, not the client, is over), so
// a 503 with the prefix's exact Retry-After and no strike. What a held is
// given back already.
func (c *Controller) shedPrefix(a *ticket, d *Decision, i int, rd ratelimit.Decision) {
	r := &a.set.rules[i]
	r.ctr.add(a.shard, rRejected, 1)
	retry := shedHint
	if rd.RetryAfter > 0 && rd.RetryAfter != ratelimit.Never && r.Algorithm != Concurrency {
		retry = rd.RetryAfter
	}
	d.Allowed, d.Kind, d.Rule, d.RetryAfter = false, Shedding, r.Name, retry
	d.Warning, d.WarningRule = false, ""
	c.done(a, d)
}

// logPrefix reports, once per second, that rule decided a new key on its
// prefix because its table is full.
func (c *Controller) logPrefix(now int64, rule, key string) {
	if ok, n := c.logs.prefix.Allow(now); ok {
		c.log.Warn("shed: key table full, new keys decided on their network prefix", slog.String("rule", rule),
			slog.String("prefix", key), slog.Int64("suppressed", n))
	}
}

// registerPrefix registers the prefix limit of dst, an IP rule whose
// Overflow is OverflowPrefix. Caller holds c.mu.
func (c *Controller) registerPrefix(dst *rule) (store.LimitID, error) {
	return c.scaled(dst, dst.prefixFactor(), "prefix", PrefixCapacity)
}
