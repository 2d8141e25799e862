package shed

import "time"

// Penalties is the progressive-penalty box the Controller consults before
// any rule (WithPenalties): a client serving a timeout is rejected at once,
// and every rejection for being over a limit is a strike. The penalty
// package's Box is the implementation meant here: pass it through
// PenaltiesOf, which drops the status its Strike returns.
//
// Keys are the client's identity key ("ip:198.51.100.7" and the like; API
// keys hashed), valid only during the call: an implementation that keeps a
// key must copy it. Implementations must be safe for concurrent use and
// must not block.
type Penalties interface {
	// Check reports whether key is serving a timeout at now, and how much
	// of it is left.
	Check(key string, now int64) (left time.Duration, penalized bool)
	// Strike records one offence of key at now.
	Strike(key string, now int64)
}

// StatusBox is a penalty box whose Strike reports a status of type S, such
// as *penalty.Box (whose Strike returns a penalty.Status).
type StatusBox[S any] interface {
	Check(key string, now int64) (time.Duration, bool)
	Strike(key string, now int64) S
}

// PenaltiesOf adapts a penalty box whose Strike returns a status, such as
// *penalty.Box, to Penalties; the status is not needed here. S is
// inferred: shed.WithPenalties(shed.PenaltiesOf(box), shed.IP).
func PenaltiesOf[S any](b StatusBox[S]) Penalties { return statusPenalties[S]{b} }

type statusPenalties[S any] struct{ b StatusBox[S] }

func (p statusPenalties[S]) Check(key string, now int64) (time.Duration, bool) {
	return p.b.Check(key, now)
}

func (p statusPenalties[S]) Strike(key string, now int64) { p.b.Strike(key, now) }
