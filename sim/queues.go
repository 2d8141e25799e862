package sim

import (
	"fmt"

	"github.com/sluicehq/sluice/queueing"
)

// QueueNames lists the standard queueing controllers, in report order.
var QueueNames = []string{"fifo", "lifo", "codel", "adaptive_lifo_codel", "priority"}

// StandardQueue returns the configuration of the named standard queueing
// controller in front of a concurrency limit of limit (the standard
// factories use the server's worker count, so that all waiting happens in
// the controller and none in the server):
//
//   - fifo: first come, first served, unbounded, no max wait: the queue
//     that collapses under overload.
//   - lifo: newest first, bounded at queueing.DefaultMaxLength (a full
//     queue sheds its oldest waiter), no max wait.
//   - codel: FIFO with CoDel shedding at queueing.DefaultTarget and
//     queueing.DefaultInterval, bounded at queueing.DefaultMaxLength.
//   - adaptive_lifo_codel: as codel, but newest first while the queue is
//     standing.
//   - priority: critical before sheddable with queueing.Share's graded
//     cut-off over queueing.DefaultMaxLength, 20% of the limit reserved for
//     critical work (Stripe's figure), FIFO within a priority, and a max
//     wait of queueing.DefaultInterval (CoDel's timeout while the queue
//     drains). Not CoDel itself: a standing queue of sheddable work would
//     make CoDel shed critical waiters after its 5ms target, although the
//     critical work alone fits the capacity.
//
// It returns an error for an unknown name.
func StandardQueue(name string, limit int) (QueueConfig, error) {
	cfg := QueueConfig{Limit: limit, MaxLength: queueing.DefaultMaxLength,
		Target: queueing.DefaultTarget, Interval: queueing.DefaultInterval}
	switch name {
	case "fifo":
		cfg.MaxLength = 0
	case "lifo":
		cfg.Order = queueing.LIFO
	case "codel":
		cfg.CoDel = true
	case "adaptive_lifo_codel":
		cfg.Order, cfg.CoDel = queueing.AdaptiveLIFO, true
	case "priority":
		cfg.Priorities, cfg.MaxWait = true, queueing.DefaultInterval
		cfg.Reserve, cfg.ReserveFrom = 0.2, queueing.Critical
	default:
		return QueueConfig{}, fmt.Errorf("sim: unknown queueing controller %q", name)
	}
	return cfg, nil
}
