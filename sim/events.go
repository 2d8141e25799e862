package sim

import "container/heap"

// event is one scheduled callback; seq breaks ties in scheduling order so
// that runs are deterministic.
type event struct {
	t   int64
	seq uint64
	f   func()
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type queue struct {
	h   eventHeap
	seq uint64
}

func (q *queue) at(t int64, f func()) {
	q.seq++
	heap.Push(&q.h, event{t: t, seq: q.seq, f: f})
}

func (q *queue) next() (event, bool) {
	if len(q.h) == 0 {
		return event{}, false
	}
	return heap.Pop(&q.h).(event), true
}
