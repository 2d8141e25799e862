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
