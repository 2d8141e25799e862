package main

import (
	"net/http"
	"time"
)

// accelerators models the expensive resource behind the endpoint: a fixed
// pool of devices, each serving one request at a time for a fixed service
// time. The service time is slept, not burned, so the demo measures the same
// capacity on a 2-core laptop as on a large server: the load generator does
// not compete with the "work" for CPU.
type accelerators struct {
	slots   chan struct{}
	service time.Duration
	stop    chan struct{} // closed when a mode ends, to free stuck handlers
}

func newAccelerators(n int, service time.Duration) *accelerators {
	return &accelerators{slots: make(chan struct{}, n), service: service, stop: make(chan struct{})}
}

// capacity is the most requests per second the pool can complete.
func (a *accelerators) capacity() float64 {
	return float64(cap(a.slots)) / a.service.Seconds()
}

// ServeHTTP is a naive inference handler, as most are: it waits for a free
// accelerator however long that takes (Go's channel queue is FIFO) and then
// does the work, even when the client has long gone. That is exactly what
// collapses under overload without admission control.
func (a *accelerators) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case a.slots <- struct{}{}:
	case <-a.stop:
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	t := time.NewTimer(a.service)
	select {
	case <-t.C:
	case <-a.stop:
		t.Stop()
	}
	<-a.slots
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte("inference done\n"))
}
