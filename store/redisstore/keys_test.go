package redisstore

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestKeysAreDistinctAndTagged: two (kind, name, key) triples give the
// same Redis key only when they are equal, and every key starts with the
// store's hash tag, whatever bytes the names and keys hold (braces and
// separators included), so no limit can read another's state and every
// key of a store hashes to one Cluster slot.
func TestKeysAreDistinctAndTagged(t *testing.T) {
	s := &Store{tag: "{p}"}
	kinds := []byte{'t', 'f', 'w', 'l', 'c', 'm'}
	rapid.Check(t, func(t *rapid.T) {
		text := rapid.StringOfN(rapid.SampledFrom([]rune{'a', ':', '{', '}', '1', 'é'}), 0, 6, -1)
		k1, k2 := rapid.SampledFrom(kinds).Draw(t, "k1"), rapid.SampledFrom(kinds).Draw(t, "k2")
		n1, n2 := text.Draw(t, "n1"), text.Draw(t, "n2")
		x1, x2 := text.Draw(t, "x1"), text.Draw(t, "x2")
		a, b := s.stateKey(k1, n1, x1), s.stateKey(k2, n2, x2)
		if same := k1 == k2 && n1 == n2 && x1 == x2; (a == b) != same {
			t.Fatalf("(%c %q %q) -> %q and (%c %q %q) -> %q", k1, n1, x1, a, k2, n2, x2, b)
		}
		if !strings.HasPrefix(a, "{p}:") || strings.Index(a, "}") != 2 {
			t.Fatalf("key %q does not start with the hash tag {p}", a)
		}
	})
	if got := s.instancesKey(); got != "{p}:instances" {
		t.Fatalf("instances key %q", got)
	}
}

// redisTag is the part of key that Redis Cluster hashes: the bytes between
// the first '{' and the first '}' after it when there are any, else the
// whole key.
func redisTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

// TestKeyTagsPlaceEachStateByItsOwnKey: with WithKeyTags, a state key's
// Cluster hash tag depends on its hit key alone (so every request that
// names a state finds it in one slot): the key's own tag under the
// prefix when it has one, the store's tag otherwise; keys stay distinct.
func TestKeyTagsPlaceEachStateByItsOwnKey(t *testing.T) {
	s := &Store{tag: "{p}", prefix: "p", keyTags: true}
	kinds := []byte{'t', 'f', 'w', 'l', 'c', 'm'}
	rapid.Check(t, func(t *rapid.T) {
		text := rapid.StringOfN(rapid.SampledFrom([]rune{'a', ':', '{', '}', '1', 'é'}), 0, 6, -1)
		k1, k2 := rapid.SampledFrom(kinds).Draw(t, "k1"), rapid.SampledFrom(kinds).Draw(t, "k2")
		n1, n2 := text.Draw(t, "n1"), text.Draw(t, "n2")
		x1, x2 := text.Draw(t, "x1"), text.Draw(t, "x2")
		a, b := s.stateKey(k1, n1, x1), s.stateKey(k2, n2, x2)
		if same := k1 == k2 && n1 == n2 && x1 == x2; (a == b) != same {
			t.Fatalf("(%c %q %q) -> %q and (%c %q %q) -> %q", k1, n1, x1, a, k2, n2, x2, b)
		}
		want := "p"
		if tag := keyTag(x1); tag != "" {
			want = "p:" + tag
			if tag != redisTag(x1) {
				t.Fatalf("key %q: tag %q, Redis hashes %q", x1, tag, redisTag(x1))
			}
		}
		if got := redisTag(a); got != want {
			t.Fatalf("key %q of hit key %q hashes by %q, want %q", a, x1, got, want)
		}
	})
}
