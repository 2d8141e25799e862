package sqlquota

import (
	"fmt"

	"github.com/sluicehq/sluice/store"
)

// The kinds of state a decide routine keeps, as it numbers them.
const (
	KindBucket  int16 = 1 // a token bucket: a debt in time
	KindFixed   int16 = 2 // a fixed window's count
	KindSliding int16 = 3 // a sliding window's two counts
)

// Limit is a registered spec with the decide routine's arguments for it.
// It is immutable once made, so safe to share; the zero value is not a
// limit (use NewLimit).
type Limit struct {
	Spec store.Spec
	// Kind is KindBucket, KindFixed or KindSliding.
	Kind int16
	// Param is a token bucket's emission interval (ratelimit.GCRA's:
	// Per/Count rounded up) or a window's span on its window clock, in ns.
	Param int64
	// Clock is a window's calendar clock (zero for a token bucket).
	Clock store.WindowClock
}

// NewLimit returns the decide routine's arguments for spec, which
// store.Spec.Validate has approved. backend names the store in the error
// ("the PostgreSQL store keeps ..."), and sliding says whether it keeps
// sliding windows. It returns an error starting with "store: " for an
// algorithm the store does not keep.
func NewLimit(spec store.Spec, backend string, sliding bool) (*Limit, error) {
	l := &Limit{Spec: spec}
	switch {
	case spec.Algorithm == store.TokenBucket:
		// Validate has seen a positive Count of at most Per ns.
		per, n := int64(spec.Rate.Per), spec.Rate.Count
		l.Kind, l.Param = KindBucket, per/n
		if per%n != 0 {
			l.Param++
		}
	case spec.Algorithm == store.FixedWindow, spec.Algorithm == store.SlidingWindow && sliding:
		l.Clock = spec.Calendar.Clock(spec.Window)
		l.Kind, l.Param = KindFixed, int64(l.Clock.Span())
		if spec.Algorithm == store.SlidingWindow {
			l.Kind = KindSliding
		}
	default:
		keeps := "token buckets and fixed windows"
		if sliding {
			keeps = "token buckets, fixed and sliding windows"
		}
		return nil, fmt.Errorf("store: limit %q: the %s store keeps %s, not %v; use store.Memory or redisstore for it", spec.Name, backend, keeps, spec.Algorithm)
	}
	return l, nil
}

// Name returns the limit's name, the key of its Registry entry.
func (l *Limit) Name() string { return l.Spec.Name }
