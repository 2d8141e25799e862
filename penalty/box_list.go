package penalty

import (
	"fmt"
	"slices"
	"time"
)

// MaxListed is the most keys one Penalized call reports.
const MaxListed = 1000

// Penalty is one key serving a timeout, as Box.Penalized reports it.
type Penalty struct {
	// Hash is the key's 64-bit hash in the box's table, keyed with the
	// table's secret random seed: never the key, which the box does not
	// keep. PardonHash takes it back.
	Hash uint64
	// Left is the time left on the timeout.
	Left time.Duration
	// Level is the escalation level in force (1 during the first timeout).
	Level int
	// Strikes counts the key's strikes within the window: those that
	// started the timeout are consumed by it, and strikes during a
	// timeout are ignored, so it is usually 0.
	Strikes int
}

// Penalized returns at most n keys serving a timeout at now, the longest
// time left first. It reads every slot of the box's table, each entry
// pinned and its history under its flag, so it takes time in proportion
// to the capacity and costs Check nothing; it allocates the result. Keys
// that change meanwhile are seen before or after the change. It returns
// an error for n outside [1, MaxListed]. Safe for concurrent use.
func (b *Box) Penalized(n int, now int64) ([]Penalty, error) {
	if n < 1 || n > MaxListed {
		return nil, fmt.Errorf("penalty: Penalized of %d keys: want 1 to %d", n, MaxListed)
	}
	out := make([]Penalty, 0, min(n, 64))
	longer := func(a, b Penalty) int {
		if a.Left > b.Left {
			return -1
		}
		return 1
	}
	b.table.Range(func(hash uint64, e *entry) bool {
		until := e.until.Load()
		if now >= until {
			return true
		}
		h := &b.history[b.table.Index(e)]
		h.lock()
		p := Penalty{Hash: hash, Left: time.Duration(until - now)}
		if h.version == e.version.Load() {
			p.Level, p.Strikes = int(b.level(h, now)), b.countStrikes(h, now)
		}
		h.unlock()
		if len(out) == n {
			if p.Left <= out[n-1].Left {
				return true
			}
			out = out[:n-1]
		}
		i, _ := slices.BinarySearchFunc(out, p, longer) // out stays sorted: n is small, the scan is the cost
		out = slices.Insert(out, i, p)
		return true
	})
	return out, nil
}

// PardonHash is Pardon for the key of hash (Penalty.Hash).
func (b *Box) PardonHash(hash uint64) bool {
	ref, ok := b.table.LookupHash(hash)
	if !ok {
		return false
	}
	b.pardon(ref.Value())
	ref.Release()
	return true
}
