package fingerprint

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
)

// Defaults of a Resolver.
const (
	// DefaultIPv6PrefixBits groups IPv6 clients by /64: one host controls at
	// least a /64, so finer keys let it rotate addresses past any limit.
	DefaultIPv6PrefixBits = 64
	// DefaultMaxHeaderBytes caps how much of the forwarding headers is read,
	// counted from the right (the end the trusted proxies wrote).
	DefaultMaxHeaderBytes = 2048
)

// ClientIP is the address a request is attributed to and how it was found.
type ClientIP struct {
	// Addr is the client address, normalised by NormalizeAddr. It is the
	// zero Addr when Source is SourceUnknown.
	Addr netip.Addr
	// Group is Addr masked to the configured prefix (/32 and /64 by
	// default): the unit that per-IP limits should key on.
	Group netip.Prefix
	// Source says how Addr was derived.
	Source Source
	// CGNAT reports that Addr lies in 100.64.0.0/10 or a configured
	// carrier-grade NAT range, where many users share one address: raise
	// per-IP limits there and lean on per-user keys.
	CGNAT bool
}

// Resolver derives a request's client IP from the TCP peer and, only when
// that peer is a configured trusted proxy, from the forwarding headers the
// proxies write. It never trusts the left-most entry of a list: it walks from
// the right (the entry the nearest proxy appended) over trusted proxies to
// the first untrusted address. An X-Forwarded-For entry that is no address
// stops the walk at the last trusted proxy, and at most MaxHeaderBytes of
// each header, counted from the right, are read.
//
// A Resolver is immutable after NewResolver and safe for concurrent use. The
// zero value is not usable.
type Resolver struct {
	trusted  []netip.Prefix
	cgnat    []netip.Prefix // WithCGNAT's, besides cgnatPrefix
	headers  []Header
	v4Bits   int
	v6Bits   int
	maxBytes int
}

// ResolverOption configures NewResolver.
type ResolverOption interface {
	apply(*Resolver) error
}

type resolverOptionFunc func(*Resolver) error

func (f resolverOptionFunc) apply(r *Resolver) error { return f(r) }

// WithTrustedProxies names the networks of the proxies in front of the
// service. Only a peer inside them is asked for forwarding headers, and
// only addresses inside them are walked over. IPv4-mapped prefixes are
// folded to IPv4. Without this option no header is ever read.
func WithTrustedProxies(prefixes ...netip.Prefix) ResolverOption {
	return resolverOptionFunc(func(r *Resolver) error {
		for _, p := range prefixes {
			if !p.IsValid() {
				return fmt.Errorf("fingerprint: invalid trusted proxy prefix %v", p)
			}
			r.trusted = append(r.trusted, normalizePrefix(p))
		}
		return nil
	})
}

// WithHeaders sets which forwarding headers are read from a trusted peer,
// in order of preference; the first that names a client wins. The default
// is X-Forwarded-For alone. X-Real-IP and True-Client-IP are read only when
// named here. It is an error to name none, an unknown one, or one twice.
func WithHeaders(headers ...Header) ResolverOption {
	return resolverOptionFunc(func(r *Resolver) error {
		if len(headers) == 0 {
			return errors.New("fingerprint: WithHeaders needs at least one header")
		}
		seen := map[Header]bool{}
		for _, h := range headers {
			if h.canonical() == "" {
				return fmt.Errorf("fingerprint: unknown header %d", h)
			}
			if seen[h] {
				return fmt.Errorf("fingerprint: header %v named twice", h)
			}
			seen[h] = true
		}
		r.headers = append([]Header(nil), headers...)
		return nil
	})
}

// WithIPv6PrefixBits groups IPv6 clients by the given prefix length, 1 to
// 128 (default 64; express-rate-limit uses 56).
func WithIPv6PrefixBits(bits int) ResolverOption {
	return resolverOptionFunc(func(r *Resolver) error {
		if bits < 1 || bits > 128 {
			return fmt.Errorf("fingerprint: IPv6 prefix bits must be in [1, 128], got %d", bits)
		}
		r.v6Bits = bits
		return nil
	})
}

// WithIPv4PrefixBits groups IPv4 clients by the given prefix length, 1 to
// 32 (default 32: one address).
func WithIPv4PrefixBits(bits int) ResolverOption {
	return resolverOptionFunc(func(r *Resolver) error {
		if bits < 1 || bits > 32 {
			return fmt.Errorf("fingerprint: IPv4 prefix bits must be in [1, 32], got %d", bits)
		}
		r.v4Bits = bits
		return nil
	})
}

// WithCGNAT adds carrier-grade NAT ranges to 100.64.0.0/10, which is always
// detected.
func WithCGNAT(prefixes ...netip.Prefix) ResolverOption {
	return resolverOptionFunc(func(r *Resolver) error {
		for _, p := range prefixes {
			if !p.IsValid() {
				return fmt.Errorf("fingerprint: invalid CGNAT prefix %v", p)
			}
			r.cgnat = append(r.cgnat, normalizePrefix(p))
		}
		return nil
	})
}

// WithMaxHeaderBytes caps the bytes of each forwarding header that are read,
// counted from the right (default 2048). n must be positive.
func WithMaxHeaderBytes(n int) ResolverOption {
	return resolverOptionFunc(func(r *Resolver) error {
		if n <= 0 {
			return fmt.Errorf("fingerprint: max header bytes must be positive, got %d", n)
		}
		r.maxBytes = n
		return nil
	})
}

// NewResolver returns a Resolver. With no options it trusts no proxy and
// keys every request on its TCP peer. It returns an error for an invalid
// option value.
func NewResolver(opts ...ResolverOption) (*Resolver, error) {
	r := &Resolver{
		headers:  []Header{HeaderXForwardedFor},
		v4Bits:   32,
		v6Bits:   DefaultIPv6PrefixBits,
		maxBytes: DefaultMaxHeaderBytes,
	}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("fingerprint: nil ResolverOption")
		}
		if err := o.apply(r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// ClientIP returns the client address of req, from req.RemoteAddr and
// req.Header. It allocates nothing.
func (r *Resolver) ClientIP(req *http.Request) ClientIP {
	return r.Resolve(req.RemoteAddr, req.Header)
}

// Resolve returns the client address of a request whose peer address is
// remoteAddr (host:port, as in http.Request.RemoteAddr) and whose headers
// are h. It allocates nothing.
func (r *Resolver) Resolve(remoteAddr string, h http.Header) ClientIP {
	peer, ok := parseNode(remoteAddr)
	if !ok {
		return ClientIP{}
	}
	if len(r.trusted) == 0 || !containsAny(r.trusted, peer) {
		if peer.Is4() && r.v4Bits == 32 && len(r.cgnat) == 0 {
			// result for the usual peer, written here rather than copied
			// out of a call: an IPv4 address, its own group, no range
			// of WithCGNAT to look in.
			o := peer.As4()
			return ClientIP{Addr: peer, Group: netip.PrefixFrom(peer, 32), Source: SourcePeer, CGNAT: o[0] == 100 && o[1]&0xc0 == 64}
		}
		return r.result(peer, SourcePeer)
	}
	named := false // some configured header was sent
	for _, hd := range r.headers {
		values := h[hd.canonical()]
		if len(values) == 0 {
			continue
		}
		named = true
		var (
			a   netip.Addr
			src Source
			ok  bool
		)
		switch hd {
		case HeaderXForwardedFor:
			a, src, ok = r.walkXFF(values, peer)
		case HeaderForwarded:
			a, src, ok = r.walkForwarded(values, peer)
		default: // the one-address headers
			a, ok = r.single(values)
			src = singleSources[hd]
		}
		if ok {
			return r.result(a, src)
		}
	}
	if !named {
		return r.result(peer, SourceProxyPeer)
	}
	return r.result(peer, SourcePeer)
}

// singleSources is the Source of each one-address header.
var singleSources = [...]Source{
	HeaderXRealIP:        SourceXRealIP,
	HeaderTrueClientIP:   SourceTrueClientIP,
	HeaderCFConnectingIP: SourceCFConnectingIP,
	HeaderFastlyClientIP: SourceFastlyClientIP,
	HeaderXClientIP:      SourceXClientIP,
}

// result fills in the grouping and CGNAT detection for a.
func (r *Resolver) result(a netip.Addr, src Source) ClientIP {
	var g netip.Prefix
	if a.Is4() && r.v4Bits == 32 {
		g = netip.PrefixFrom(a, 32) // the default: the address is its group, nothing to mask
	} else {
		bits := r.v6Bits
		if a.Is4() {
			bits = r.v4Bits
		}
		g, _ = a.Prefix(bits) // bits are validated against the family
	}
	return ClientIP{Addr: a, Group: g, Source: src, CGNAT: r.inCGNAT(a)}
}

// inCGNAT reports whether a lies in 100.64.0.0/10, the shared address
// space of RFC 6598 that carrier-grade NAT puts many subscribers behind
// (tested on its octets: every request from an IPv4 peer asks), or in a
// range of WithCGNAT.
func (r *Resolver) inCGNAT(a netip.Addr) bool {
	if a.Is4() {
		if o := a.As4(); o[0] == 100 && o[1]&0xc0 == 64 {
			return true
		}
	}
	return containsAny(r.cgnat, a)
}

// single reads a one-address header (X-Real-IP, True-Client-IP): the last
// instance wins, as the nearest proxy sets it last; anything that is not one
// address is ignored.
func (r *Resolver) single(values []string) (netip.Addr, bool) {
	v := trimOWS(values[len(values)-1])
	if len(v) > r.maxBytes {
		return netip.Addr{}, false
	}
	return parseNode(v)
}

// walkXFF walks the merged X-Forwarded-For instances from the right: the
// last instance's last entry was appended by the nearest proxy. Trusted
// proxies are passed over; the first valid untrusted address is the client.
// An entry that is no address ("unknown", "unix:", garbage) stops the walk:
// the trusted proxy that appended it (peer, or the last trusted entry) is
// the client's stand-in (SourceHidden), since everything to its left may
// have been written by the client.
func (r *Resolver) walkXFF(values []string, peer netip.Addr) (netip.Addr, Source, bool) {
	budget := r.maxBytes
	hop := peer
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for end := len(v); end >= 0; {
			start := lastIndexByte(v[:end], ',') + 1
			if budget -= end - start + 1; budget < 0 {
				return netip.Addr{}, 0, false
			}
			entry := trimOWS(v[start:end])
			end = start - 1
			a, ok := parseNode(entry)
			if !ok {
				return hop, SourceHidden, true
			}
			if containsAny(r.trusted, a) {
				hop = a
				continue
			}
			return a, SourceXForwardedFor, true
		}
	}
	return netip.Addr{}, 0, false
}

// walkForwarded walks RFC 7239 Forwarded elements from the right like
// walkXFF. An "unknown" or obfuscated node stops the walk: the proxy that
// wrote it (the last trusted hop) is returned as SourceHidden.
func (r *Resolver) walkForwarded(values []string, peer netip.Addr) (netip.Addr, Source, bool) {
	budget := r.maxBytes
	hop := peer
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for end := len(v); end >= 0; {
			start := lastElementStart(v[:end])
			if budget -= end - start + 1; budget < 0 {
				return netip.Addr{}, 0, false
			}
			elem := v[start:end]
			end = start - 1
			kind, a := parseForwardedElement(elem)
			switch kind {
			case nodeInvalid:
				continue
			case nodeHidden:
				return hop, SourceHidden, true
			}
			if containsAny(r.trusted, a) {
				hop = a
				continue
			}
			return a, SourceForwarded, true
		}
	}
	return netip.Addr{}, 0, false
}
