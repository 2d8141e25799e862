package grpcshed

import (
	"context"
	"net"
	"net/http"
	"net/netip"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/sluicehq/sluice/shed"
)

// mdSource reads a call's incoming metadata: md when the caller has it (a
// Tap), else from ctx one key at a time, which copies only the keys that
// are present.
type mdSource struct {
	ctx context.Context
	md  metadata.MD
}

func (s mdSource) get(key string) []string {
	if s.md != nil {
		return s.md[key]
	}
	return metadata.ValueFromIncomingContext(s.ctx, key)
}

func (s mdSource) first(key string) string {
	if key == "" {
		return ""
	}
	if v := s.get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (s mdSource) all() metadata.MD {
	if s.md != nil {
		return s.md
	}
	md, _ := metadata.FromIncomingContext(s.ctx)
	return md
}

// forwarding are the metadata keys of the forwarding headers a Resolver
// reads, and the canonical header names it reads them under.
var forwarding = [...]struct{ key, header string }{
	{"x-forwarded-for", "X-Forwarded-For"},
	{"forwarded", "Forwarded"},
	{"x-real-ip", "X-Real-Ip"},
	{"true-client-ip", "True-Client-Ip"},
}

// attempt builds the Attempt of a call of fullMethod whose context is ctx
// and metadata src, and reports whether its peer address was understood.
func (cfg *config) attempt(ctx context.Context, fullMethod string, src mdSource) (shed.Attempt, bool) {
	var at shed.Attempt
	known := false
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		// Forwarding metadata only when a proxy sent some and the Resolver
		// may trust one (it reads it only from a trusted peer).
		var h http.Header
		for i := 0; cfg.proxied && i < len(forwarding); i++ {
			if v := src.get(forwarding[i].key); len(v) > 0 {
				if h == nil {
					h = make(http.Header, 1)
				}
				h[forwarding[i].header] = v
			}
		}
		if ip := cfg.res.Resolve(addrString(p.Addr), h); ip.Group.IsValid() {
			at.IP, known = ip.Group.Addr(), true
		}
	}
	k := &cfg.keys
	at.User, at.APIKey, at.Tenant, at.Tier = src.first(k.User), src.first(k.APIKey), src.first(k.Tenant), src.first(k.Tier)
	if cfg.client != nil {
		cl := cfg.client(ctx, fullMethod, src.all())
		at.User = or(cl.User, at.User)
		at.APIKey = or(cl.APIKey, at.APIKey)
		at.Tenant = or(cl.Tenant, at.Tenant)
		at.Tier = or(cl.Tier, at.Tier)
		at.Priority = cl.Priority
	}
	if cfg.cat != nil {
		at.Category = cfg.cat(fullMethod)
	} else {
		at.Category = fullMethod
	}
	if cfg.cost != nil {
		at.Cost = cfg.cost(fullMethod)
	}
	return at, known
}

// addrString returns a as host:port: for a TCP address through netip, an
// IPv4 one unmapped (one allocation, and the short form to parse again;
// net.TCPAddr.String makes two).
func addrString(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
	}
	return a.String()
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
