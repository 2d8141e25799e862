package policy

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/shed"
)

// costOptions returns the shed options of a validated CostSpec.
func costOptions(cs *CostSpec) []shed.Option {
	var opts []shed.Option
	def := cs.Default
	if def == 0 {
		def = 1
	}
	if cs.RequestHeader != "" {
		name := textproto.CanonicalMIMEHeaderKey(cs.RequestHeader)
		opts = append(opts, shed.WithCost(func(r *http.Request) int64 {
			if n, ok := headerCount(r.Header, name); ok {
				return max(n, 1) // zero would mean the default of 1 anyway
			}
			return def
		}))
	} else if def != 1 {
		opts = append(opts, shed.WithCost(func(*http.Request) int64 { return def }))
	}
	if cs.ResponseHeader != "" {
		name := textproto.CanonicalMIMEHeaderKey(cs.ResponseHeader)
		opts = append(opts, shed.WithActualCost(func(h http.Header) (int64, bool) { return headerCount(h, name) }))
	}
	return opts
}

// headerCount reads a whole non-negative number from field name of h.
func headerCount(h http.Header, name string) (int64, bool) {
	v := h[name]
	if len(v) == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	return n, err == nil && n >= 0
}

// costSpec checks a CostSpec.
func (v *validator) costSpec(path string, cs *CostSpec) {
	if cs.Default < 0 {
		v.failf(path+".default", "must not be negative, got %d", cs.Default)
	}
	for _, f := range []struct{ field, name string }{{"request_header", cs.RequestHeader}, {"response_header", cs.ResponseHeader}} {
		for i := 0; i < len(f.name); i++ {
			if c := f.name[i]; c <= ' ' || c >= 0x7f || c == ':' {
				v.failf(path+"."+f.field, "%q is not a header field name", f.name)
				break
			}
		}
	}
}

// exemptSpec checks an ExemptSpec and returns its shed.Exemptions.
func (v *validator) exemptSpec(path string, e *ExemptSpec) *shed.Exemptions {
	var ex shed.Exemptions
	if len(e.CIDRs) == 0 && len(e.Paths) == 0 {
		v.failf(path, "names no cidr and no path")
	}
	for i, s := range e.CIDRs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			v.failf(fmt.Sprintf("%s.cidrs[%d]", path, i), "%q is not a network such as 10.0.0.0/8", s)
			continue
		}
		ex.CIDRs = append(ex.CIDRs, p)
	}
	for i, s := range e.Paths {
		if !strings.HasPrefix(s, "/") {
			v.failf(fmt.Sprintf("%s.paths[%d]", path, i), "%q must start with /", s)
			continue
		}
		ex.Paths = append(ex.Paths, s)
	}
	return &ex
}
