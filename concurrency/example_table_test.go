package concurrency_test

import (
	"fmt"
	"sync/atomic"

	"github.com/sluicehq/sluice/concurrency"
)

// strikes is a per-client state: how many bad requests, and until when the
// client stays blocked. Its zero value is the fresh state.
type strikes struct {
	count        atomic.Int64
	blockedUntil atomic.Int64
}

func (s *strikes) Reset() { s.count.Store(0); s.blockedUntil.Store(0) }

func ExampleTable() {
	// Room for two clients; a client is recovered (as good as new) once its
	// block has expired.
	clients, err := concurrency.NewTable[strikes](2, func(s *strikes, now int64) bool {
		return now >= s.blockedUntil.Load()
	})
	if err != nil {
		panic(err)
	}
	strike := func(client string, now int64) {
		r, ok := clients.Get(client, now)
		if !ok {
			fmt.Printf("t=%d %s: table full of blocked clients, rejected\n", now, client)
			return
		}
		defer r.Release()
		n := r.Value().count.Add(1)
		r.Value().blockedUntil.Store(now + 10*n)
		fmt.Printf("t=%d %s: %d strike(s), blocked until %d\n", now, client, n, now+10*n)
	}
	strike("alice", 0)
	strike("bob", 1)
	strike("mallory", 2)  // both entries are live: mallory does not evict them
	strike("alice", 3)    // alice's state survived the flood
	strike("mallory", 12) // bob's block expired: his entry is recycled
	fmt.Printf("%+v\n", clients.Stats())
	// Output:
	// t=0 alice: 1 strike(s), blocked until 10
	// t=1 bob: 1 strike(s), blocked until 11
	// t=2 mallory: table full of blocked clients, rejected
	// t=3 alice: 2 strike(s), blocked until 23
	// t=12 mallory: 1 strike(s), blocked until 22
	// {Entries:2 Capacity:2 Evictions:1 Overflows:1}
}
