package sim_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// Twice the capacity offered to the standard server: without a limit the
// queue grows until every request misses its deadline; a fixed limit at the
// worker count keeps goodput at capacity.
func Example() {
	s, err := sim.Standard("overload2x", true, 0)
	if err != nil {
		panic(err)
	}
	s.Duration = 5 * time.Second
	limited, _ := sim.Static(sim.StdWorkers)
	for _, c := range []struct {
		name string
		c    sim.Controller
	}{{"none", sim.Unlimited()}, {"static 16", limited}} {
		res, err := sim.Run(s, c.c, 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: goodput %.1f of capacity, shed %.1f\n", c.name, res.Goodput, res.Shed)
	}
	// Output:
	// none: goodput 0.0 of capacity, shed 0.0
	// static 16: goodput 1.0 of capacity, shed 0.5
}

// Twice the capacity offered to a queue in front of a limit at the worker
// count: an unbounded FIFO makes everyone wait until every request misses
// its deadline; CoDel sheds waiters once a standing queue forms and keeps
// the wait of served work short.
func ExampleNewQueue() {
	s, err := sim.Standard("overload2x", true, 0)
	if err != nil {
		panic(err)
	}
	s.Duration = 5 * time.Second
	for _, name := range []string{"fifo", "codel"} {
		cfg, err := sim.StandardQueue(name, sim.StdWorkers)
		if err != nil {
			panic(err)
		}
		c, err := sim.NewQueue(cfg)
		if err != nil {
			panic(err)
		}
		res, err := sim.Run(s, c, 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: goodput %.1f of capacity, p99 wait %v\n", name, res.Goodput, res.P99Wait.Round(10*time.Millisecond))
	}
	// Output:
	// fifo: goodput 0.0 of capacity, p99 wait 2.48s
	// codel: goodput 1.0 of capacity, p99 wait 50ms
}
