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
