package fingerprint

import (
	"fmt"
	"net/netip"
)

// Category is a validated rate-limit category ("login", "api", "search")
// that builds store keys in the layout rl:{category}:{kind}:{id}, where kind
// is ip, user, key or tenant. Because a category holds no ':' and the id
// comes last, two different (category, kind, id) triples never build the
// same key.
//
// A Category is an immutable value, safe for concurrent use. The zero value
// is not usable; call NewCategory.
type Category struct {
	prefix string // "rl:{category}:"
}

// NewCategory returns the Category named name: 1 to 64 bytes of lower-case
// ASCII letters, digits, '-', '_' or '.'. Any other name is an error.
func NewCategory(name string) (Category, error) {
	if name == "" || len(name) > 64 {
		return Category{}, fmt.Errorf("fingerprint: category must be 1 to 64 bytes, got %d", len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return Category{}, fmt.Errorf("fingerprint: category %q: byte %q not allowed", name, c)
		}
	}
	return Category{prefix: "rl:" + name + ":"}, nil
}

// Name returns the category name ("" for the zero Category).
func (c Category) Name() string {
	if len(c.prefix) < 4 {
		return ""
	}
	return c.prefix[3 : len(c.prefix)-1]
}

// AppendIP appends rl:{category}:ip:{group} to dst, where group is the
// client's grouping prefix (ClientIP.Group, "198.51.100.7/32" or
// "2001:db8::/64"). It allocates only when dst lacks room.
func (c Category) AppendIP(dst []byte, ip ClientIP) []byte {
	dst = append(dst, c.prefix...)
	dst = append(dst, "ip:"...)
	return appendPrefix(dst, ip.Group)
}

// AppendUser appends rl:{category}:user:{id}. The id is used as given:
// pass it through a Hasher first (Hasher.Sum) if it is itself sensitive.
func (c Category) AppendUser(dst []byte, id string) []byte {
	dst = append(dst, c.prefix...)
	dst = append(dst, "user:"...)
	return append(dst, id...)
}

// AppendTenant appends rl:{category}:tenant:{id}.
func (c Category) AppendTenant(dst []byte, id string) []byte {
	dst = append(dst, c.prefix...)
	dst = append(dst, "tenant:"...)
	return append(dst, id...)
}

// AppendAPIKey appends rl:{category}:key:{sum}, where sum is h's keyed hash
// of apiKey: the raw key never enters the store key.
func (c Category) AppendAPIKey(dst []byte, h *Hasher, apiKey string) []byte {
	dst = append(dst, c.prefix...)
	dst = append(dst, "key:"...)
	return h.AppendSumString(dst, apiKey)
}

// appendPrefix appends p as addr/bits; an invalid prefix appends "invalid".
func appendPrefix(dst []byte, p netip.Prefix) []byte {
	if !p.IsValid() {
		return append(dst, "invalid"...)
	}
	return p.AppendTo(dst)
}
