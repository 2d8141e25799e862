package shed

import (
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
