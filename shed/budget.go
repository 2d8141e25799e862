package shed

import (
	"fmt"

	"github.com/sluicehq/sluice/store"
)

// DefaultMaxBytes is a per-key rule's byte budget when Rule.MaxBytes is
// zero: 64 MiB, the memory of about 4 million token-bucket keys, or of
// 65,536 sliding-log keys of 60 each.
const DefaultMaxBytes = 64 << 20

// maxBytes returns the rule's byte budget.
func (r *Rule) maxBytes() int64 {
	if r.MaxBytes == 0 {
		return DefaultMaxBytes
	}
	return r.MaxBytes
}

// worstBytes returns the most memory per-key rule r's store limits hold,
// with every key of their capacities live and grown at once
// (store.Spec.MemoryBytes): its own, and those of its keys in
// carrier-grade NAT ranges, of its tightened keys and of its network
// prefixes (OverflowPrefix) when it has them.
func (c *Controller) worstBytes(r *Rule) (int64, error) {
	total, err := r.spec().MemoryBytes()
	if err != nil {
		return 0, err
	}
	add := func(factor float64, capacity int) error {
		spec, err := scaledSpec(r, factor, capacity)
		if err != nil {
			return err
		}
		b, err := spec.MemoryBytes()
		total += b // each at most 2^55: no overflow
		return err
	}
	if s := c.suspicion; s != nil && s.floor < 1 {
		if err := add(s.floor, SuspectCapacity); err != nil {
			return 0, err
		}
	}
	if f := r.cgnatFactor(); f != 1 {
		if err := add(f, CGNATCapacity); err != nil {
			return 0, err
		}
	}
	if r.Overflow == OverflowPrefix {
		if err := add(r.prefixFactor(), PrefixCapacity); err != nil {
			return 0, err
		}
	}
	return total, nil
}

// checkBudget returns an error naming r and the figures when the worst
// case of per-key rule r exceeds its byte budget.
func (c *Controller) checkBudget(r *Rule) error {
	worst, err := c.worstBytes(r)
	if err != nil {
		return r.errorf("%w", err)
	}
	if budget := r.maxBytes(); worst > budget {
		keys := r.Capacity
		if keys == 0 {
			keys = store.DefaultCapacity
		}
		return r.errorf("its worst case, %s for %v of %d per key at %d keys, exceeds its byte budget of %s;"+
			" lower Capacity or Limit, use an algorithm of constant state per key (%v, %v), or raise MaxBytes",
			formatBytes(worst), r.Algorithm, r.Limit, keys, formatBytes(budget), SlidingWindow, TokenBucket)
	}
	return nil
}

// formatBytes writes n exactly and in binary units: "1246890944 bytes
// (1.2 GiB)".
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%d bytes (%.1f %ciB)", n, float64(n)/float64(div), "KMGTPE"[exp])
}
