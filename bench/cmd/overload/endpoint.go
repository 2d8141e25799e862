package main

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"
)

// endpoint is the work one request does in the server. The zero value is
// the no-op endpoint (an empty 200). It is read by every handler goroutine
// and changed only through double, which any goroutine may call once.
type endpoint struct {
	// slots bounds how many requests wait for the downstream at once (the
	// I/O endpoint's pool); zero means no bound.
	slots int
	// wait is how long the downstream takes per request, honouring the
	// request's context.
	wait atomic.Int64
	// rounds is how many sha256 rounds of real CPU work a request does
	// before its wait.
	rounds atomic.Int64
	// worked counts the requests whose CPU work ran (counted as it ends).
	worked atomic.Int64
	pool   chan struct{}
}

// newEndpoint returns an endpoint of rounds sha256 rounds followed by a
// wait of wait in one of slots slots (slots zero: unbounded). It returns an
// error for negative values or a wait without slots when slots is needed.
func newEndpoint(rounds int64, wait time.Duration, slots int) (*endpoint, error) {
	if rounds < 0 || wait < 0 || slots < 0 {
		return nil, fmt.Errorf("overload: negative endpoint parameter (rounds %d, wait %v, slots %d)", rounds, wait, slots)
	}
	e := &endpoint{slots: slots}
	e.rounds.Store(rounds)
	e.wait.Store(int64(wait))
	if slots > 0 {
		e.pool = make(chan struct{}, slots)
	}
	return e, nil
}

// double doubles the work of every later request: the capacity drop.
func (e *endpoint) double() {
	e.rounds.Store(2 * e.rounds.Load())
	e.wait.Store(2 * e.wait.Load())
}

// cpuWork does rounds sha256 rounds: a fixed amount of CPU, so that a
// handler that is descheduled takes longer, as it would in production.
func cpuWork(rounds int64) [32]byte {
	var sum [32]byte
	for range rounds {
		sum = sha256.Sum256(sum[:])
	}
	return sum
}

// ServeHTTP does the endpoint's work and answers 200 with four bytes. A
// request whose context ends while it waits for a slot or for the
// downstream is answered 504, which the client no longer reads; its CPU
// work ran and is counted in worked all the same.
func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sum := cpuWork(e.rounds.Load())
	e.worked.Add(1)
	if d := time.Duration(e.wait.Load()); d > 0 {
		if e.pool != nil {
			select {
			case e.pool <- struct{}{}:
				defer func() { <-e.pool }()
			case <-r.Context().Done():
				w.WriteHeader(http.StatusGatewayTimeout)
				return
			}
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			w.WriteHeader(http.StatusGatewayTimeout)
			return
		}
	}
	_, _ = w.Write(sum[:4])
}

// calibrateRounds returns how many sha256 rounds take target of CPU in this
// process: from the fastest of 31 timed runs of a fixed batch.
func calibrateRounds(target time.Duration) int64 {
	const batch = 2000
	cpuWork(batch) // warm the code and the caches
	var best []time.Duration
	for range 31 {
		t0 := time.Now()
		cpuWork(batch)
		best = append(best, time.Since(t0))
	}
	// The fastest batch: another process on the CPU only ever slows one.
	perRound := slices.Min(best) / batch
	if perRound <= 0 {
		perRound = 1
	}
	return max(1, int64(target/perRound))
}
