package memcachestore

import "github.com/sluicehq/sluice/store"

// CounterKey exposes the key of a counter to the tests, which evict it.
func (s *Store) CounterKey(id store.LimitID, key string, now int64) string {
	l := s.limits.Lookup(id)
	k, _ := s.counterKey(l, key, l.clock.At(now)/l.span)
	return k
}
