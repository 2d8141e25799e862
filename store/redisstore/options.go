package redisstore

import (
	"fmt"
	"strings"
	"time"
)

// DefaultTimeout is the per-call deadline of a Store unless WithTimeout
// sets another: a hung Redis costs a request at most this much.
const DefaultTimeout = 20 * time.Millisecond

// DefaultPrefix is the key prefix of a Store unless WithPrefix sets another.
const DefaultPrefix = "sluice"

// Option configures New.
type Option interface{ apply(*config) error }

type config struct {
	prefix  string
	timeout time.Duration
	keyTags bool
}

type prefixOption string

func (o prefixOption) apply(c *config) error {
	p := string(o)
	if p == "" || strings.ContainsAny(p, "{}") {
		return fmt.Errorf("redisstore: prefix %q must be non-empty and free of braces (it is the keys' hash tag)", p)
	}
	c.prefix = p
	return nil
}

// WithPrefix sets the prefix of every key the store writes (DefaultPrefix
// by default). Stores with the same prefix share their limits: give each
// deployment its own. The prefix becomes the keys' hash tag ({prefix}), so
// it must not contain braces, and on Redis Cluster all keys of one prefix
// live in one slot, on one master.
func WithPrefix(prefix string) Option { return prefixOption(prefix) }

type timeoutOption time.Duration

func (o timeoutOption) apply(c *config) error {
	if o <= 0 {
		return fmt.Errorf("redisstore: timeout must be positive, got %v", time.Duration(o))
	}
	c.timeout = time.Duration(o)
	return nil
}

type keyTagsOption struct{}

func (keyTagsOption) apply(c *config) error { c.keyTags = true; return nil }

// WithKeyTags spreads a store's keys over Redis Cluster slots by the hash
// tags of the hit keys. A hit key that holds a tag, the bytes between its
// first '{' and the first '}' after it (non-empty, as Redis Cluster reads
// tags), keeps its state under the tag {prefix:tag}, on the slot of that
// tag; a key without one stays under {prefix}, as without the option.
// Every key of one request must carry the same tag, or none at all:
// Decide returns an error otherwise, as for any bad input, because one
// script can only reach one slot.
//
// So the spread is by a part of the key that the caller chooses and puts
// into every key of a request: a tenant, for "{acme}" and "{acme}:alice".
// The price is in the counting: a state is found by its own key only, so
// a limit that must span tags (a global limit, or a per-IP limit named
// with accounts that carry tags) is either kept untagged, in requests of
// untagged keys only, or counted per tag ("{acme}1.2.3.4" counts the IP
// within acme, not across tenants). A per-request tag taken from the first
// hit's key would not be sound: a state named second in one request and
// first in another would live in two slots and be counted twice.
//
// Keys are named differently with the option on, so turn it on for every
// instance of a prefix at once; limits start fresh when it changes. The
// heartbeat of a Fallback stays under {prefix}.
func WithKeyTags() Option { return keyTagsOption{} }

// WithTimeout sets the deadline of each call to Redis (DefaultTimeout by
// default). A call that misses it fails with an error matching
// store.ErrUnavailable; the caller's own deadline, when earlier, still
// applies.
func WithTimeout(d time.Duration) Option { return timeoutOption(d) }
