package fingerprint

import (
	"net/netip"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// cgnatPrefix is the shared address space of RFC 6598, which a Resolver
// always counts as carrier-grade NAT.
var cgnatPrefix = netip.MustParsePrefix("100.64.0.0/10")

// nearIPv4 draws strings around the a.b.c.d:port form: fields of one to
// four digits (leading zeros, values past 255), three to five of them, and
// an optional tail of ':' and digits, or a stray byte.
func nearIPv4() *rapid.Generator[string] {
	field := rapid.StringOfN(rapid.RuneFrom([]rune("0123456789")), 1, 4, -1)
	return rapid.Custom(func(t *rapid.T) string {
		n := rapid.IntRange(3, 5).Draw(t, "fields")
		parts := make([]string, n)
		for i := range parts {
			parts[i] = field.Draw(t, "field")
		}
		s := strings.Join(parts, ".")
		switch rapid.IntRange(0, 3).Draw(t, "tail") {
		case 1:
			s += ":" + rapid.StringOfN(rapid.RuneFrom([]rune("0123456789")), 0, 6, -1).Draw(t, "port")
		case 2:
			s += rapid.SampledFrom([]string{":", "%eth0", ".", "x", ":80:90", " "}).Draw(t, "junk")
		}
		return s
	})
}

// TestParseNodeAgreesWithTheGeneralParser: the IPv4 fast path accepts
// exactly the strings the general parser accepts, with the same address.
func TestParseNodeAgreesWithTheGeneralParser(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := nearIPv4().Draw(t, "s")
		a, ok := parseNode(s)
		b, okb := parseNodeGeneral(s)
		if a != b || ok != okb {
			t.Fatalf("parseNode(%q) = %v, %v; the general parser says %v, %v", s, a, ok, b, okb)
		}
	})
}

// TestResolverGroupIsTheAddressPrefix: whatever the prefix lengths, a
// peer's Group is its address masked to the family's length, and CGNAT
// says whether a configured range (or 100.64.0.0/10) holds it.
func TestResolverGroupIsTheAddressPrefix(t *testing.T) {
	extra := netip.MustParsePrefix("198.18.0.0/15")
	rapid.Check(t, func(t *rapid.T) {
		v4, v6 := rapid.IntRange(1, 32).Draw(t, "v4"), rapid.IntRange(1, 128).Draw(t, "v6")
		opts := []ResolverOption{WithIPv4PrefixBits(v4), WithIPv6PrefixBits(v6)}
		withExtra := rapid.Bool().Draw(t, "extra")
		if withExtra {
			opts = append(opts, WithCGNAT(extra))
		}
		r, err := NewResolver(opts...)
		if err != nil {
			t.Fatal(err)
		}
		var a netip.Addr
		if rapid.Bool().Draw(t, "is4") {
			b := rapid.SliceOfN(rapid.Byte(), 4, 4).Draw(t, "b")
			b[0] = rapid.SampledFrom([]byte{b[0], 100, 198}).Draw(t, "first")
			a = netip.AddrFrom4([4]byte(b))
		} else {
			a = netip.AddrFrom16([16]byte(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "b")))
		}
		got := r.Resolve(netip.AddrPortFrom(a, 443).String(), nil)
		a = a.Unmap() // [::ffff:a.b.c.d] is the IPv4 client a.b.c.d
		bits := v6
		if a.Is4() {
			bits = v4
		}
		want, _ := a.Prefix(bits)
		cgnat := cgnatPrefix.Contains(a) || withExtra && extra.Contains(a)
		if got.Addr != a || got.Group != want || got.CGNAT != cgnat || got.Source != SourcePeer {
			t.Fatalf("Resolve(%v) = %+v, want group %v, CGNAT %v", a, got, want, cgnat)
		}
	})
}
