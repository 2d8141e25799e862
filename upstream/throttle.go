package upstream

import "time"

// Adaptive client throttling (Google SRE book, "Handling Overload"): a client
// that sees its upstream reject much of what it sends rejects locally, with
// probability
//
//	P(reject) = max(0, (requests - K·accepts) / (requests + 1))
//
// over a trailing window, instead of adding load the upstream will refuse.

const (
	// throttleSlots is the number of slots of the trailing window.
	throttleSlots = 12
	// throttleSlot is the length of one slot: 12 slots of 10 s make the
	// two-minute window of the SRE book. The window slides one slot at a
	// time, so it covers between 110 s and 120 s of history.
	throttleSlot = int64(10 * time.Second)
	// throttleDefaultK is the SRE book's K.
	throttleDefaultK = 2.0
)

// throttleWindow counts requests and accepts over the trailing window in a
// fixed ring of slots: bounded memory (296 bytes) whatever the traffic. It
// is not safe for concurrent use; the Transport guards it with the key's
// lock. Its zero value is an empty window.
type throttleWindow struct {
	epoch    [throttleSlots]int64 // slot number (now/throttleSlot) + 1 each slot counts; 0: never used
	requests [throttleSlots]int64
	accepts  [throttleSlots]int64
}

// slot returns the index of the slot for now, cleared if it held an older
// slot's counts.
func (w *throttleWindow) slot(now int64) int {
	e := now/throttleSlot + 1
	i := int(e % throttleSlots)
	if w.epoch[i] != e {
		w.epoch[i], w.requests[i], w.accepts[i] = e, 0, 0
	}
	return i
}

// request counts one request attempted at now.
func (w *throttleWindow) request(now int64) { w.requests[w.slot(now)]++ }

// accept counts one request the upstream accepted at now.
func (w *throttleWindow) accept(now int64) { w.accepts[w.slot(now)]++ }

// totals returns the requests and accepts of the window ending at now.
func (w *throttleWindow) totals(now int64) (requests, accepts int64) {
	e := now/throttleSlot + 1
	for i := range throttleSlots {
		if w.epoch[i] > e-throttleSlots && w.epoch[i] <= e {
			requests += w.requests[i]
			accepts += w.accepts[i]
		}
	}
	return requests, accepts
}

// empty reports whether the window ending at now counts nothing, so the
// state is as good as fresh.
func (w *throttleWindow) empty(now int64) bool {
	r, a := w.totals(now)
	return r == 0 && a == 0
}

// throttleProbability returns the SRE formula's rejection probability for
// the counts, with multiplier k.
func throttleProbability(requests, accepts int64, k float64) float64 {
	p := (float64(requests) - k*float64(accepts)) / float64(requests+1)
	return max(0, p)
}
