package grpcshed

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/fingerprint"
	"github.com/sluicehq/sluice/shed"
)

// Option configures NewServer and NewTap.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	res *fingerprint.Resolver
	// proxied: the Resolver is the caller's, which may trust proxies, so
	// the forwarding metadata is worth reading (the default trusts none).
	proxied bool
	keys    MetadataKeys
	client  func(ctx context.Context, fullMethod string, md metadata.MD) shed.Client
	cat     func(fullMethod string) string
	cost    func(fullMethod string) int64
}

// MetadataKeys names the request metadata that carries a client's
// identities: "" for one the requests do not carry. Keys are lowercase
// (gRPC metadata keys are); the first value of a key is the identity.
// Metadata is what the client sent: name only keys that an authenticating
// proxy or interceptor before this one has checked or set.
type MetadataKeys struct {
	User, APIKey, Tenant, Tier string
}

// WithResolver finds a call's client address with r (trusted proxies,
// prefix grouping), from the peer address and, when the peer is one of r's
// trusted proxies, the forwarding metadata it set (x-forwarded-for,
// forwarded, x-real-ip, true-client-ip). Without it the peer is the client
// (fingerprint.NewResolver with no options).
func WithResolver(r *fingerprint.Resolver) Option {
	return optionFunc(func(c *config) error {
		if r == nil {
			return errors.New("grpcshed: WithResolver(nil)")
		}
		c.res, c.proxied = r, true
		return nil
	})
}

// WithMetadataKeys reads the user, API key, tenant and tier of a call from
// the metadata keys k names. It returns an error from NewServer for a key
// that is not a valid lowercase metadata key, or when k names none.
func WithMetadataKeys(k MetadataKeys) Option {
	return optionFunc(func(c *config) error {
		if k == (MetadataKeys{}) {
			return errors.New("grpcshed: WithMetadataKeys names no key")
		}
		for _, key := range []string{k.User, k.APIKey, k.Tenant, k.Tier} {
			if key != "" && !validKey(key) {
				return fmt.Errorf("grpcshed: %q is not a lowercase metadata key", key)
			}
		}
		c.keys = k
		return nil
	})
}

// validKey reports whether key is a metadata key as gRPC sends it: digits,
// lowercase letters, '-', '_' and '.'.
func validKey(key string) bool {
	for i := range len(key) {
		b := key[i]
		if !('a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '-' || b == '_' || b == '.') {
			return false
		}
	}
	return true
}

// WithClient tells who a call is beyond its address, with f: for an
// identity that an authentication interceptor put in ctx. f is given the
// call's context, full method and incoming metadata (nil in a Tap when the
// call has none); it runs on every call and must be fast and safe for
// concurrent use. Its fields replace those of WithMetadataKeys, where it
// returns them non-empty.
func WithClient(f func(ctx context.Context, fullMethod string, md metadata.MD) shed.Client) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("grpcshed: WithClient(nil)")
		}
		c.client = f
		return nil
	})
}

// WithCategory gives a call's category, the rules it is decided by, from
// its full method ("/package.Service/Method"). The default is the full
// method itself: a rule of category "/pkg.Svc/Get" limits that method, a
// rule of category "" every method. A func that returns the service
// ("/pkg.Svc") limits a service as one. f must be fast and safe for
// concurrent use.
func WithCategory(f func(fullMethod string) string) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("grpcshed: WithCategory(nil)")
		}
		c.cat = f
		return nil
	})
}

// WithCost gives a call's cost, the units it takes from each rule, from
// its full method. The default is 1. A negative cost is a decision error:
// the call is answered codes.Unavailable, as the HTTP middleware answers a
// broken decision 503.
func WithCost(f func(fullMethod string) int64) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("grpcshed: WithCost(nil)")
		}
		c.cost = f
		return nil
	})
}

// newConfig applies opts.
func newConfig(opts []Option) (config, error) {
	var cfg config
	for _, o := range opts {
		if o == nil {
			return config{}, errors.New("grpcshed: nil Option")
		}
		if err := o.apply(&cfg); err != nil {
			return config{}, err
		}
	}
	if cfg.res == nil {
		cfg.res, _ = fingerprint.NewResolver() // no options, no error
	}
	return cfg, nil
}
