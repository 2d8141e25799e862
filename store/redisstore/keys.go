package redisstore

import (
	"strconv"

	"github.com/sluicehq/sluice/store"
)

// Key layout: {prefix}:<kind>:<len(name)>:<name>:<key>.
//
// The prefix in braces is the hash tag: every key of one store hashes to
// one Redis Cluster slot, so a request may name any of them in one script.
// The name is length-prefixed so that no name and key pair can spell
// another's. Kinds: t token bucket, f fixed window, w sliding window,
// l sliding log, c a concurrency limit's leases, m their metadata.
// The instances of a Fallback register under {prefix}:instances.
func (s *Store) stateKey(kind byte, name, key string) string {
	b := make([]byte, 0, len(s.tag)+len(name)+len(key)+12)
	b = append(b, s.tag...)
	b = append(b, ':', kind, ':')
	b = strconv.AppendInt(b, int64(len(name)), 10)
	b = append(b, ':')
	b = append(b, name...)
	b = append(b, ':')
	b = append(b, key...)
	return string(b)
}

func kindOf(a store.Algorithm) byte {
	switch a {
	case store.TokenBucket:
		return 't'
	case store.FixedWindow:
		return 'f'
	case store.SlidingWindow:
		return 'w'
	case store.SlidingLog:
		return 'l'
	}
	return 'c'
}

func (s *Store) instancesKey() string { return s.tag + ":instances" }
