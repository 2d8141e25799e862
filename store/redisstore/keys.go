package redisstore

import (
	"fmt"
	"strconv"
	"strings"

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
//
// With WithKeyTags, a key with a hash tag of its own has the tag
// {prefix:tag} instead: the tag is the first thing in braces, so it is
// the one Redis Cluster hashes.
func (s *Store) stateKey(kind byte, name, key string) string {
	tag := ""
	if s.keyTags {
		tag = keyTag(key)
	}
	b := make([]byte, 0, len(s.tag)+len(tag)+len(name)+len(key)+13)
	if tag != "" {
		b = append(b, '{')
		b = append(b, s.prefix...)
		b = append(b, ':')
		b = append(b, tag...)
		b = append(b, '}')
	} else {
		b = append(b, s.tag...)
	}
	b = append(b, ':', kind, ':')
	b = strconv.AppendInt(b, int64(len(name)), 10)
	b = append(b, ':')
	b = append(b, name...)
	b = append(b, ':')
	b = append(b, key...)
	return string(b)
}

// keyTag returns key's Redis Cluster hash tag: the bytes between its first
// '{' and the first '}' after it, or "" when there are none.
func keyTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return ""
	}
	return key[i+1 : i+1+j]
}

// checkTags returns an error when, with WithKeyTags, the hits of req do
// not all carry the same tag (or all none). req must have passed Check.
func (s *Store) checkTags(req *store.Request) error {
	if !s.keyTags {
		return nil
	}
	tag := keyTag(req.Hits[0].Key)
	for i := 1; i < req.N; i++ {
		if t := keyTag(req.Hits[i].Key); t != tag {
			return fmt.Errorf("redisstore: with WithKeyTags every key of a request carries one hash tag, or none: hit 0 has %q, hit %d %q", tag, i, t)
		}
	}
	return nil
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
