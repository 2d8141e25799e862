package shed

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/penalty"
)

// Penalties is the progressive-penalty box the Controller consults before
// any rule (WithPenalties): a client serving a timeout is rejected at once,
// and every rejection for being over a limit is a strike. *penalty.Box
// satisfies it.
//
// Keys are the client's identity key ("ip:198.51.100.7" and the like; API
// keys hashed), valid only during the call: an implementation that keeps a
// key must copy it (penalty.Box keeps only a keyed hash). Implementations
// must be safe for concurrent use and must not block.
type Penalties interface {
	// Check reports whether key is serving a timeout at now, and how much
	// of it is left.
	Check(key string, now int64) (left time.Duration, penalized bool)
	// Strike records one offence of key at now.
	Strike(key string, now int64) penalty.Status
}

var _ Penalties = (*penalty.Box)(nil)

// penaltyStatser is what penalty.Box offers beyond Penalties.
type penaltyStatser interface {
	Stats() penalty.Stats
}

// pardoner is what penalty.Box offers beyond Penalties to end a timeout.
type pardoner interface {
	Pardon(key string) bool
}

// Pardon forgives client v of the penalty identity (WithPenalties): an IP
// address (grouped as the middleware groups it), a user id, an API key
// (raw; hashed here) or a tenant id. Its timeout, strikes and level are
// dropped; it reports whether the box held any. It returns an error when
// the Controller has no penalties, when the box cannot pardon (penalty.Box
// can), or for a key the identity cannot have (not an address for IP),
// never naming the key. Safe for concurrent use.
func (c *Controller) Pardon(v string) (bool, error) {
	if c.pen == nil {
		return false, errors.New("shed: Pardon: the Controller has no penalties (WithPenalties)")
	}
	p, ok := c.pen.(pardoner)
	if !ok {
		return false, fmt.Errorf("shed: Pardon: the penalty box (%T) cannot pardon", c.pen)
	}
	key, err := c.overrideKey(&Rule{Identity: c.penID}, v)
	if err != nil {
		return false, fmt.Errorf("shed: Pardon: %w", err)
	}
	return p.Pardon(key), nil
}
