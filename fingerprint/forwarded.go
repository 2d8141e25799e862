package fingerprint

import (
	"net/netip"
	"strings"
)

// The parsers here read headers the client may have written (all of the
// left part of a list is the client's). They never index past their input
// and are fuzzed (FuzzForwarded, FuzzXForwardedFor). They allocate nothing
// except the error net/netip builds for an entry made only of address
// characters that still does not parse ("1.2.3"): at most one small
// allocation per such entry, and entries are bounded by the byte cap.

// nodeKind classifies an RFC 7239 node.
type nodeKind uint8

const (
	nodeInvalid nodeKind = iota // malformed, or no "for" parameter
	nodeAddr                    // an IP address (with or without port)
	nodeHidden                  // "unknown" or an obfuscated identifier
)

func lastIndexByte(s string, c byte) int { return strings.LastIndexByte(s, c) }

// trimOWS trims HTTP optional white space (spaces and tabs).
func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// lastElementStart returns the start of the last comma-separated element of
// s, skipping commas inside quoted strings. It scans from the right, so the
// elements a trusted proxy appended parse the same whatever unbalanced
// quotes the client put further left. A quote is escaped when an odd run of
// backslashes precedes it.
func lastElementStart(s string) int {
	inQuote := false
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case '"':
			n := 0
			for j := i - 1; j >= 0 && s[j] == '\\'; j-- {
				n++
			}
			if n%2 == 0 {
				inQuote = !inQuote
			}
		case ',':
			if !inQuote {
				return i + 1
			}
		}
	}
	return 0
}

// nextPair cuts s at the first ';' outside a quoted string.
func nextPair(s string) (pair, rest string) {
	inQuote := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if inQuote {
				i++ // the escaped byte
			}
		case '"':
			inQuote = !inQuote
		case ';':
			if !inQuote {
				return s[:i], s[i+1:]
			}
		}
	}
	return s, ""
}

// parseForwardedElement finds the one "for" parameter of a Forwarded
// element (pairs separated by ';', names case-insensitive, values tokens or
// quoted strings) and classifies its node. A repeated "for", a pair without
// '=' or a quoted value with escapes makes the element invalid.
func parseForwardedElement(e string) (nodeKind, netip.Addr) {
	var value string
	found := false
	for e != "" {
		var pair string
		pair, e = nextPair(e)
		pair = trimOWS(pair)
		if pair == "" {
			continue
		}
		eq := strings.IndexByte(pair, '=')
		if eq <= 0 {
			return nodeInvalid, netip.Addr{}
		}
		if strings.EqualFold(trimOWS(pair[:eq]), "for") {
			if found {
				return nodeInvalid, netip.Addr{}
			}
			found, value = true, trimOWS(pair[eq+1:])
		}
	}
	if !found {
		return nodeInvalid, netip.Addr{}
	}
	if value != "" && value[0] == '"' {
		if len(value) < 2 || value[len(value)-1] != '"' {
			return nodeInvalid, netip.Addr{}
		}
		value = value[1 : len(value)-1]
		if strings.ContainsAny(value, "\\\"") {
			return nodeInvalid, netip.Addr{}
		}
	}
	return classifyNode(value)
}

// classifyNode parses node = nodename [ ":" node-port ] of RFC 7239:
// nodename is IPv4, "[" IPv6 "]", "unknown" or an obfuscated "_" token; the
// port is digits or an obfuscated token. A bare IPv6 address (unquoted,
// unbracketed, against the RFC) is accepted leniently.
func classifyNode(s string) (nodeKind, netip.Addr) {
	if s == "" {
		return nodeInvalid, netip.Addr{}
	}
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return nodeInvalid, netip.Addr{}
		}
		if rest := s[end+1:]; rest != "" && (rest[0] != ':' || !isNodePort(rest[1:])) {
			return nodeInvalid, netip.Addr{}
		}
		a, ok := parseBare(s[1:end])
		if !ok || !a.Is6() {
			return nodeInvalid, netip.Addr{}
		}
		return nodeAddr, NormalizeAddr(a)
	}
	name := s
	if i := strings.IndexByte(s, ':'); i >= 0 {
		if strings.IndexByte(s[i+1:], ':') >= 0 {
			a, ok := parseBare(s)
			if !ok || !a.Is6() {
				return nodeInvalid, netip.Addr{}
			}
			return nodeAddr, NormalizeAddr(a)
		}
		if !isNodePort(s[i+1:]) {
			return nodeInvalid, netip.Addr{}
		}
		name = s[:i]
	}
	if strings.EqualFold(name, "unknown") || isObfuscated(name) {
		return nodeHidden, netip.Addr{}
	}
	a, ok := parseBare(name)
	if !ok || !a.Is4() {
		return nodeInvalid, netip.Addr{}
	}
	return nodeAddr, a
}

// isNodePort reports whether s is a port: 1 to 5 digits or an obfuscated
// token.
func isNodePort(s string) bool { return isPort(s) || isObfuscated(s) }

// isObfuscated reports whether s is "_" followed by one or more of
// ALPHA / DIGIT / "." / "_" / "-" (RFC 7239 section 6.3).
func isObfuscated(s string) bool {
	if len(s) < 2 || s[0] != '_' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}
