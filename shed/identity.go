package shed

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
	"unsafe"

	"github.com/sluicehq/sluice/fingerprint"
)

// MaxKeyParts is the most parts a composite Key has.
const MaxKeyParts = 4

// Key is what a Composite rule counts per: up to MaxKeyParts parts, in
// order, the unused ones "" at the end. A part is one of
//
//   - an identity: "ip", "user", "api_key", "tenant" (a request without
//     it, no user for "user", is not counted by the rule, as for a rule of
//     that Identity; "ip" is the address group, "unknown" when none, and
//     a composite rule has no CGNAT handling, which IP rules have);
//   - "route": the pattern the router matched (http.Request.Pattern) when
//     it names one route, otherwise the request's path normalised by
//     fingerprint.AppendNormalizedPath (case, slashes, dot segments,
//     escapes), so that /login, /Login/ and /%6cogin are one key;
//   - "ja4": the JA4 fingerprint of the connection's TLS handshake
//     (fingerprint.ConnContext and CaptureTLS);
//   - "header:<Name>": the first value of a request header, always hashed
//     (keyed, as API keys are), since a header may carry a credential;
//   - "attr:<name>": an attribute the caller names and gives per request
//     (Client.Attributes, Attempt.Attributes): a model name, a plan, a
//     device id.
//
// A request without a route, JA4, header or attribute value is counted
// with the empty value for it: leaving a header out does not escape the
// rule. For Decide, Attempt.Attributes gives every part but the
// identities by its part name ("route", "ja4", "header:X-Model",
// "attr:model"), as the key should hold it (a route as the middleware
// would: the pattern, or fingerprint.NormalizePath of the path); the
// middleware reads "route", "ja4" and headers from the request, and the
// caller's attributes from Client.Attributes.
//
// Values are bounded before they reach a store key: a value is kept as
// given up to MaxIdentity bytes unless it holds '|' or starts with '#';
// otherwise, and for api_key and header parts always, it is replaced by
// "#" and its keyed hash. So a composite key is at most
// MaxCompositeKey bytes and never holds a raw API key or header.
//
// A Key is comparable, so a Rule stays comparable; write it as a
// literal: shed.Key{"tenant", "attr:model"}.
type Key [MaxKeyParts]string

// MaxCompositeKey bounds the store key of a Composite rule: "c:" and
// MaxKeyParts values of at most MaxIdentity bytes, '|' between them.
const MaxCompositeKey = len("c:") + MaxKeyParts*(MaxIdentity+1)

// Attribute is one named value of a request for Composite rules'
// "attr:" parts (Name is the part's name without "attr:"), or, given to
// Decide, any part but an identity (Name is the whole part: "route",
// "ja4", "header:X-Model", "attr:model").
type Attribute struct {
	Name, Value string
}

// partKind is how a key part's value is found and written.
type partKind uint8

const (
	partIdentity partKind = iota // one of the identities
	partRoute
	partJA4
	partHeader
	partAttr
)

// keyPart is a compiled part of a Key.
type keyPart struct {
	kind partKind
	id   Identity // of partIdentity
	// name is the part as written ("header:X-Model"), which Decide's
	// attributes are looked up by; attr is an attr part's name without
	// "attr:", which Client.Attributes are looked up by; header is a
	// header part's canonical header key.
	name, attr, header string
}

// parts returns k's parts, validated: at least one, no "" before another
// part, none repeated, each of a known kind.
func (k Key) parts() ([]keyPart, error) {
	var out []keyPart
	for i, p := range k {
		if p == "" {
			for _, q := range k[i+1:] {
				if q != "" {
					return nil, fmt.Errorf("key part %d is empty but part %q follows", i, q)
				}
			}
			break
		}
		for _, q := range k[:i] {
			if q == p {
				return nil, fmt.Errorf("key part %q is repeated", p)
			}
		}
		kp := keyPart{name: p}
		switch name, arg, _ := strings.Cut(p, ":"); {
		case p == "ip":
			kp.id = IP
		case p == "user":
			kp.id = User
		case p == "api_key":
			kp.id = APIKey
		case p == "tenant":
			kp.id = Tenant
		case p == "route":
			kp.kind = partRoute
		case p == "ja4":
			kp.kind = partJA4
		case name == "header":
			if !validHeaderName(arg) {
				return nil, fmt.Errorf("key part %q: %q is not a header name", p, arg)
			}
			kp.kind, kp.header = partHeader, textproto.CanonicalMIMEHeaderKey(arg)
		case name == "attr":
			if arg == "" || len(arg) > 64 || strings.ContainsAny(arg, "| \t") {
				return nil, fmt.Errorf("key part %q: an attribute name is 1 to 64 bytes without '|' or spaces", p)
			}
			kp.kind, kp.attr = partAttr, arg
		default:
			return nil, fmt.Errorf("unknown key part %q (want ip, user, api_key, tenant, route, ja4, header:<Name> or attr:<name>)", p)
		}
		out = append(out, kp)
	}
	if len(out) == 0 {
		return nil, errors.New("a composite rule needs a Key of at least one part")
	}
	return out, nil
}

// validHeaderName reports whether s is an HTTP field name (a token of
// RFC 9110), of at most 64 bytes.
func validHeaderName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// requestParts is what the middleware reads from a request for the
// Composite rules of a rule set: whether some part is a route or a JA4,
// and the headers parts name (canonical keys).
type requestParts struct {
	route, ja4 bool
	headers    []string
}

// maxRequestHeaders bounds the distinct headers a rule set's keys read.
const maxRequestHeaders = 8

// collectParts compiles the keys of the set's Composite rules into
// s.keyed and s.req.
func (s *ruleSet) collectParts() error {
	for i := range s.rules {
		r := &s.rules[i]
		if r.Identity != Composite {
			continue
		}
		parts, err := r.Key.parts()
		if err != nil {
			return r.errorf("%w", err) // validated already: not reached
		}
		for j := range parts {
			p := &parts[j]
			switch p.kind {
			case partRoute:
				s.req.route = true
			case partJA4:
				s.req.ja4 = true
			case partHeader:
				if !containsString(s.req.headers, p.header) {
					if len(s.req.headers) == maxRequestHeaders {
						return r.errorf("the rules' keys read more than %d distinct headers", maxRequestHeaders)
					}
					s.req.headers = append(s.req.headers, p.header)
				}
			}
		}
		if s.keyed == nil {
			s.keyed = make([][]keyPart, len(s.rules))
		}
		s.keyed[i] = parts
	}
	return nil
}

// readParts records in a what the set's Composite rules read from r: the
// route (into a.buf), the JA4 and the headers' first values. It allocates
// nothing.
func (a *ticket) readParts(req *requestParts, r *http.Request) {
	if req.route {
		start := len(a.buf)
		if p := r.Pattern; p != "" && !strings.HasSuffix(p, "/") && !strings.HasSuffix(p, "...}") {
			a.buf = append(a.buf, p...)
		} else if r.URL != nil {
			a.buf = fingerprint.AppendNormalizedPath(a.buf, r.URL.EscapedPath())
		}
		a.route = span{start, len(a.buf)}
		a.hasRoute = true
	}
	if req.ja4 {
		if fp, ok := fingerprint.TLSFromContext(r.Context()); ok {
			a.ja4, a.hasJA4 = fp.JA4, true
		}
	}
	for i, h := range req.headers {
		if v := r.Header[h]; len(v) > 0 {
			a.headers[i] = v[0]
		}
	}
	a.reqParts = req
}

// span is a part of a ticket's buf.
type span struct{ start, end int }

// partValue returns the value of part p of the attempt, and whether the
// attempt has it (identities only may be missing).
func (a *ticket) partValue(p *keyPart) (string, bool) {
	switch p.kind {
	case partIdentity:
		switch p.id {
		case User:
			return a.ask.User, a.ask.User != ""
		case APIKey:
			return a.ask.APIKey, a.ask.APIKey != ""
		case Tenant:
			return a.ask.Tenant, a.ask.Tenant != ""
		}
		return "", true // IP: written from the address
	case partRoute:
		if a.hasRoute {
			return unsafe.String(unsafe.SliceData(a.buf[a.route.start:]), a.route.end-a.route.start), true
		}
	case partJA4:
		if a.hasJA4 {
			return a.ja4, true
		}
	case partHeader:
		if req := a.reqParts; req != nil {
			for i, h := range req.headers {
				if h == p.header {
					return a.headers[i], true
				}
			}
		}
	case partAttr:
		for _, at := range a.ask.Attributes {
			if at.Name == p.attr {
				return at.Value, true
			}
		}
	}
	for _, at := range a.ask.Attributes { // Decide's callers name the whole part
		if at.Name == p.name {
			return at.Value, true
		}
	}
	return "", true
}

// buildComposite builds in buf the store key of the Composite rule at
// position j of the plan's per-key rules, whose parts are parts, and
// reports whether the attempt has every identity the key names.
// compositeString reads it.
func (a *ticket) buildComposite(j int, parts []keyPart) bool {
	for k := range parts {
		if _, ok := a.partValue(&parts[k]); !ok {
			a.ckeys[j] = span{}
			return false
		}
	}
	start := len(a.buf)
	a.buf = append(a.buf, "c:"...)
	for k := range parts {
		if k > 0 {
			a.buf = append(a.buf, '|')
		}
		p := &parts[k]
		if p.kind == partIdentity && p.id == IP {
			a.buf = appendAddr(a.buf, a.ask.IP)
			continue
		}
		v, _ := a.partValue(p) // read before the append: the route lies in buf
		a.buf = a.c.appendPart(a.buf, p, v)
	}
	a.ckeys[j] = span{start, len(a.buf)}
	return true
}

// compositeString returns the built key of position j (see keyString).
func (a *ticket) compositeString(j int) string {
	k := a.ckeys[j]
	return unsafe.String(&a.buf[k.start], k.end-k.start)
}

// appendAddr appends a key part's address: as appendIPKey writes it,
// without "ip:".
func appendAddr(dst []byte, ip netip.Addr) []byte {
	n := len(dst)
	dst = appendIPKey(dst, ip)
	return append(dst[:n], dst[n+len("ip:"):]...)
}

// appendPart appends value v of part p, bounded: as given up to
// MaxIdentity bytes without '|' and not starting with '#', else "#" and
// its keyed hash; API keys and headers are always hashed.
func (c *Controller) appendPart(dst []byte, p *keyPart, v string) []byte {
	secret := p.kind == partHeader || p.kind == partIdentity && p.id == APIKey
	if !secret && len(v) <= MaxIdentity && (v == "" || v[0] != '#') && strings.IndexByte(v, '|') < 0 {
		return append(dst, v...)
	}
	return c.reading.hasher.AppendSumString(append(dst, '#'), v)
}

// compositeKey returns the store key of Composite rule r for v, the
// values of its parts separated by '|' (an address for "ip", the raw API
// key or header value, which is hashed, a route as the key holds it: the
// pattern, or the normalised path), as a request builds it: for overrides
// and ResetKey.
func (c *Controller) compositeKey(r *Rule, v string) (string, error) {
	parts, err := r.Key.parts()
	if err != nil {
		return "", err
	}
	vals := strings.SplitN(v, "|", len(parts))
	if len(vals) != len(parts) {
		return "", fmt.Errorf("key has %d values, the rule's key %d parts (%s), separated by '|'", len(vals), len(parts), r.Key)
	}
	dst := []byte("c:")
	for k := range parts {
		if k > 0 {
			dst = append(dst, '|')
		}
		p := &parts[k]
		if p.kind == partIdentity && p.id == IP {
			ip, err := netip.ParseAddr(vals[k])
			if err != nil {
				return "", fmt.Errorf("key part ip: %q is not an IP address", vals[k])
			}
			dst = appendAddr(dst, c.reading.res.Resolve(ip.String(), nil).Group.Addr()) // grouped as requests are
			continue
		}
		if p.kind == partIdentity && vals[k] == "" {
			return "", fmt.Errorf("key part %s is empty", p.name)
		}
		dst = c.appendPart(dst, p, vals[k])
	}
	return string(dst), nil
}

// String returns the parts joined by "+", such as "tenant+attr:model".
func (k Key) String() string {
	var b strings.Builder
	for _, p := range k {
		if p == "" {
			break
		}
		if b.Len() > 0 {
			b.WriteByte('+')
		}
		b.WriteString(p)
	}
	return b.String()
}
