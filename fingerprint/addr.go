package fingerprint

import (
	"net/netip"
	"strings"
)

// NormalizeAddr returns a with an IPv4-mapped IPv6 address (::ffff:a.b.c.d)
// folded to IPv4 and any IPv6 zone removed, so that one host has one
// spelling. An invalid a is returned unchanged.
func NormalizeAddr(a netip.Addr) netip.Addr {
	if !a.IsValid() {
		return a
	}
	a = a.Unmap()
	if a.Zone() != "" {
		a = a.WithZone("")
	}
	return a
}

// normalizePrefix folds an IPv4-mapped prefix (::ffff:0:0/96 and longer) to
// its IPv4 form and masks it, so that Contains agrees with NormalizeAddr.
func normalizePrefix(p netip.Prefix) netip.Prefix {
	a := p.Addr()
	if a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96).Masked()
	}
	return netip.PrefixFrom(a.WithZone(""), p.Bits()).Masked()
}

// parseNode parses one address as proxies write it: a.b.c.d, a.b.c.d:port,
// a bare IPv6 address, [v6] or [v6]:port, with an optional %zone that is
// dropped before parsing (so no zone string is interned). It allocates
// nothing and returns the normalised address.
func parseNode(s string) (netip.Addr, bool) {
	// The common case first: a.b.c.d:port, as net/http fills RemoteAddr for
	// an IPv4 peer. Anything else takes the general path, which accepts the
	// same strings the same way (FuzzParseNode and
	// TestParseNodeAgreesWithTheGeneralParser check both agree).
	if a, ok := parseIPv4Port(s); ok {
		return a, true
	}
	return parseNodeGeneral(s)
}

// parseIPv4Port parses s when it is a dotted quad as netip.ParseAddr
// accepts one (four decimal fields of 0..255, no leading zeros), alone or
// followed by ':' and a port of one to five digits. For anything else it
// reports false, and the general path decides. One pass, no call: it is
// the parse of every request from an IPv4 peer.
func parseIPv4Port(s string) (netip.Addr, bool) {
	var ip [4]byte
	i := 0
	for f := range ip {
		if f > 0 {
			if i >= len(s) || s[i] != '.' {
				return netip.Addr{}, false
			}
			i++
		}
		if i >= len(s) {
			return netip.Addr{}, false
		}
		v := uint(s[i] - '0') // a byte below '0' wraps past 9
		if v > 9 {
			return netip.Addr{}, false
		}
		i++
		if v != 0 { // a field that starts with 0 is "0": no leading zeros
			for end := min(i+2, len(s)); i < end; i++ {
				d := uint(s[i] - '0')
				if d > 9 {
					break
				}
				v = v*10 + d
			}
			if v > 255 {
				return netip.Addr{}, false
			}
		}
		ip[f] = byte(v)
	}
	if i < len(s) && (s[i] != ':' || !isPort(s[i+1:])) {
		return netip.Addr{}, false // a fourth digit, a fifth field, junk: the general path says no
	}
	return netip.AddrFrom4(ip), true
}

// parseNodeGeneral is parseNode for every form.
func parseNodeGeneral(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		rest := s[end+1:]
		if rest != "" && (rest[0] != ':' || !isPort(rest[1:])) {
			return netip.Addr{}, false
		}
		s = s[1:end]
		a, ok := parseBare(s)
		if !ok || !a.Is6() {
			return netip.Addr{}, false
		}
		return NormalizeAddr(a), true
	}
	if i := strings.IndexByte(s, ':'); i >= 0 && strings.IndexByte(s[i+1:], ':') < 0 {
		// Exactly one colon: IPv4 with a port.
		if !isPort(s[i+1:]) {
			return netip.Addr{}, false
		}
		a, ok := parseBare(s[:i])
		if !ok || !a.Is4() {
			return netip.Addr{}, false
		}
		return a, true
	}
	a, ok := parseBare(s)
	if !ok {
		return netip.Addr{}, false
	}
	return NormalizeAddr(a), true
}

// parseBare parses an address without brackets or port, cutting a zone off
// first.
func parseBare(s string) (netip.Addr, bool) {
	zoned := false
	if i := strings.IndexByte(s, '%'); i >= 0 {
		if i == 0 || i == len(s)-1 {
			return netip.Addr{}, false
		}
		s, zoned = s[:i], true
	}
	if !addrChars(s) {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s)
	if err != nil || (zoned && !a.Is6()) {
		return netip.Addr{}, false
	}
	return a, true
}

// addrChars reports whether s could be an address in text form: at most 45
// bytes of hex digits, '.' and ':'. It screens out most junk before
// netip.ParseAddr, whose error (one small allocation) is then reserved for
// near-misses such as "1.2.3".
func addrChars(s string) bool {
	if s == "" || len(s) > 45 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}

// isPort reports whether s is a decimal port of one to five digits.
func isPort(s string) bool {
	if s == "" || len(s) > 5 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// containsAny reports whether one of ps contains a.
func containsAny(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
