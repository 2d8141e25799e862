package shed

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/sluicehq/sluice/fingerprint"
)

// Exemptions are the requests the middleware lets through without asking
// any rule or the penalty box: health checks, internal callers. They are
// explicit (a client is never unlimited by a bad value), counted
// (Stats.Exempt) and checked before anything else. A request is exempt
// when its client address (as the resolver finds it) lies in one of CIDRs,
// or its normalised path (fingerprint.NormalizePath: case, slashes, dot
// segments, escapes) is one of Paths or lies under one that ends in "/".
type Exemptions struct {
	CIDRs []netip.Prefix
	Paths []string
}

// WithExemptions lets the requests ex names through the middleware
// unlimited. It returns an error from New for an invalid prefix, an empty
// path or one that does not start with "/", and for no exemption at all.
func WithExemptions(ex Exemptions) Option {
	return optionFunc(func(c *config) error {
		if len(ex.CIDRs) == 0 && len(ex.Paths) == 0 {
			return errors.New("shed: WithExemptions names no CIDR and no path")
		}
		var e exemptions
		for _, p := range ex.CIDRs {
			if !p.IsValid() {
				return fmt.Errorf("shed: exempt CIDR %v is not valid", p)
			}
			e.cidrs = append(e.cidrs, p.Masked())
		}
		for _, p := range ex.Paths {
			if !strings.HasPrefix(p, "/") {
				return fmt.Errorf("shed: exempt path %q must start with /", p)
			}
			n := fingerprint.NormalizePath(p)
			if strings.HasSuffix(p, "/") && !strings.HasSuffix(n, "/") {
				n += "/"
			}
			e.paths = append(e.paths, n)
		}
		c.exempt = &e
		return nil
	})
}

// exemptions is a compiled Exemptions.
type exemptions struct {
	cidrs []netip.Prefix
	paths []string // normalised; a trailing "/" covers the subtree
}

// match reports whether a request from addr (valid or not) for path is
// exempt.
func (e *exemptions) match(addr netip.Addr, path string) bool {
	if addr.IsValid() {
		for _, p := range e.cidrs {
			if p.Contains(addr) {
				return true
			}
		}
	}
	if len(e.paths) == 0 {
		return false
	}
	var buf [256]byte
	n := fingerprint.AppendNormalizedPath(buf[:0], path) // on the stack for most paths
	for _, p := range e.paths {
		switch {
		case string(n) == p:
			return true
		case !strings.HasSuffix(p, "/"):
		case len(n) >= len(p) && string(n[:len(p)]) == p, len(n)+1 == len(p) && string(n) == p[:len(n)]:
			return true // under the subtree, or its root without the slash
		}
	}
	return false
}
