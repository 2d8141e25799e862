package fingerprint

// Source says how a ClientIP was derived.
type Source uint8

const (
	// SourceUnknown: the peer address could not be parsed (a Unix socket, a
	// test double); the ClientIP's Addr is invalid.
	SourceUnknown Source = iota
	// SourcePeer: the TCP peer address, because the peer is not a trusted
	// proxy, or it is and no configured header named an untrusted client.
	SourcePeer
	// SourceXForwardedFor: the right-most X-Forwarded-For entry that is not
	// a trusted proxy.
	SourceXForwardedFor
	// SourceForwarded: the right-most RFC 7239 Forwarded "for" node that is
	// not a trusted proxy.
	SourceForwarded
	// SourceXRealIP: the X-Real-IP header written by a trusted proxy.
	SourceXRealIP
	// SourceTrueClientIP: the True-Client-IP header written by a trusted
	// proxy.
	SourceTrueClientIP
	// SourceHidden: a trusted proxy reported the client as "unknown" or by
	// an obfuscated identifier (RFC 7239), or the X-Forwarded-For walk met
	// an entry it cannot parse ("unknown", "unix:"); Addr is the last
	// trusted proxy, never an entry to the left, which the client wrote.
	SourceHidden
	// SourceCFConnectingIP, SourceFastlyClientIP and SourceXClientIP: the
	// one-address header of that name, written by a trusted proxy.
	SourceCFConnectingIP
	SourceFastlyClientIP
	SourceXClientIP
	// SourceProxyPeer: the TCP peer, a trusted proxy that sent none of the
	// configured headers (a misconfigured proxy, or a request it made
	// itself): the request is keyed on the proxy.
	SourceProxyPeer
)

var sourceNames = [...]string{
	SourceUnknown:        "unknown",
	SourcePeer:           "peer",
	SourceXForwardedFor:  "x-forwarded-for",
	SourceForwarded:      "forwarded",
	SourceXRealIP:        "x-real-ip",
	SourceTrueClientIP:   "true-client-ip",
	SourceHidden:         "hidden",
	SourceCFConnectingIP: "cf-connecting-ip",
	SourceFastlyClientIP: "fastly-client-ip",
	SourceXClientIP:      "x-client-ip",
	SourceProxyPeer:      "proxy-peer",
}

// String returns the lower-case name of s ("peer", "x-forwarded-for", ...).
func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return "invalid"
}

// Header names a request header that trusted proxies write the client
// address into. Configure only the headers your proxies actually set or
// overwrite: a header a proxy passes through untouched is written by the
// client.
type Header uint8

const (
	// HeaderXForwardedFor is X-Forwarded-For: a comma-separated list that
	// each proxy appends its peer to.
	HeaderXForwardedFor Header = iota + 1
	// HeaderForwarded is RFC 7239 Forwarded; its "for" parameters are read.
	HeaderForwarded
	// HeaderXRealIP is X-Real-IP: one address set by the proxy (nginx).
	HeaderXRealIP
	// HeaderTrueClientIP is True-Client-IP: one address set by the proxy
	// (Akamai, Cloudflare Enterprise).
	HeaderTrueClientIP
	// HeaderCFConnectingIP is CF-Connecting-IP: one address set by
	// Cloudflare.
	HeaderCFConnectingIP
	// HeaderFastlyClientIP is Fastly-Client-IP: one address set by Fastly
	// (when the service configures it to overwrite it).
	HeaderFastlyClientIP
	// HeaderXClientIP is X-Client-IP: one address set by some load
	// balancers.
	HeaderXClientIP
)

// canonical returns the canonical MIME key of h, so that lookups index the
// http.Header map directly without canonicalising (and allocating).
func (h Header) canonical() string {
	switch h {
	case HeaderXForwardedFor:
		return "X-Forwarded-For"
	case HeaderForwarded:
		return "Forwarded"
	case HeaderXRealIP:
		return "X-Real-Ip"
	case HeaderTrueClientIP:
		return "True-Client-Ip"
	case HeaderCFConnectingIP:
		return "Cf-Connecting-Ip"
	case HeaderFastlyClientIP:
		return "Fastly-Client-Ip"
	case HeaderXClientIP:
		return "X-Client-Ip"
	}
	return ""
}

// String returns the canonical header name of h.
func (h Header) String() string {
	if c := h.canonical(); c != "" {
		return c
	}
	return "invalid"
}
