package shed

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/sfv"
)

// quotaPolicy is one quota as the client sees it, for the IETF
// RateLimit-Policy header field: Quota units per Window, named Name.
type quotaPolicy struct {
	// Name identifies the policy in both header fields; printable ASCII.
	Name string
	// Quota is how many units the window holds (the draft's q).
	Quota int64
	// Window is the period the quota applies to (the draft's w), sent in
	// whole seconds, rounded up.
	Window time.Duration
	// Unit is the draft's qu: "" (requests, the default and omitted),
	// "requests", "content-bytes" or "concurrent-requests".
	Unit string
}

// validate returns an error for a policy no valid header can express.
func (p quotaPolicy) validate() error {
	if p.Name == "" {
		return fmt.Errorf("shed: policy name is empty")
	}
	for i := 0; i < len(p.Name); i++ {
		if c := p.Name[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("shed: policy name %q has a byte outside printable ASCII", p.Name)
		}
	}
	if p.Quota <= 0 || p.Quota > sfv.MaxInteger {
		return fmt.Errorf("shed: policy %q quota must be in 1..%d, got %d", p.Name, int64(sfv.MaxInteger), p.Quota)
	}
	if p.Window <= 0 {
		return fmt.Errorf("shed: policy %q window must be positive, got %v", p.Name, p.Window)
	}
	switch p.Unit {
	case "", "requests", "content-bytes", "concurrent-requests":
	default:
		return fmt.Errorf("shed: policy %q unit %q is not one of requests, content-bytes, concurrent-requests", p.Name, p.Unit)
	}
	return nil
}

// decimalPairs holds the two digits of 0..99, for appendDecimal.
const decimalPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

// appendDecimal appends v, which must not be negative, in decimal: what
// strconv.AppendInt writes, straight into dst's spare capacity (the hot
// path's header values and keys; about a third faster for ten digits).
func appendDecimal(dst []byte, v int64) []byte {
	u := uint64(v)
	n := 1
	for p := uint64(10); u >= p && n < 19; p *= 10 {
		n++
	}
	dst = slices.Grow(dst, n)
	dst = dst[:len(dst)+n]
	i := len(dst)
	for u >= 100 {
		q := u / 100
		r := (u - q*100) * 2
		i -= 2
		dst[i], dst[i+1] = decimalPairs[r], decimalPairs[r+1]
		u = q
	}
	if u >= 10 {
		dst[i-2], dst[i-1] = decimalPairs[u*2], decimalPairs[u*2+1]
	} else {
		dst[i-1] = byte('0' + u)
	}
	return dst
}

// ceilSeconds rounds d up to whole seconds: a client told to come back
// after it must never come back too early (and fail again).
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// appendPolicy appends one member of the RateLimit-Policy list.
func appendPolicy(dst []byte, p quotaPolicy) []byte {
	dst = sfv.AppendString(dst, p.Name)
	dst = append(dst, ";q="...)
	dst = sfv.AppendInteger(dst, p.Quota)
	if p.Unit != "" {
		dst = append(dst, ";qu="...)
		dst = sfv.AppendString(dst, p.Unit)
	}
	dst = append(dst, ";w="...)
	return sfv.AppendInteger(dst, ceilSeconds(p.Window))
}

// policyField returns the RateLimit-Policy field value for ps, in order.
func policyField(ps []quotaPolicy) string {
	var b []byte
	for i, p := range ps {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendPolicy(b, p)
	}
	return string(b)
}

// appendRateLimitItem appends one member of the RateLimit list: name,
// remaining units r, and t, the seconds until more quota (rounded up).
func appendRateLimitItem(dst []byte, name string, remaining int64, reset time.Duration) []byte {
	dst = sfv.AppendString(dst, name)
	dst = append(dst, ";r="...)
	dst = sfv.AppendInteger(dst, max(0, remaining))
	dst = append(dst, ";t="...)
	return sfv.AppendInteger(dst, ceilSeconds(reset))
}
