package sim

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// The standard server: 16 workers, mean service 20ms (half fixed, half
// exponential), so a capacity of 800 requests per second; clients time out
// after 200ms.
const (
	StdWorkers  = 16
	StdService  = 20 * time.Millisecond
	StdDeadline = 200 * time.Millisecond
)

// StdCapacity is the standard server's capacity in requests per second.
const StdCapacity = StdWorkers * float64(time.Second) / float64(StdService)

// ScenarioNames lists the standard scenarios in report order.
var ScenarioNames = []string{"unloaded", "overload2x", "overload10x", "capacity_drop", "slow_dependency", "retry_storm", "critical3x"}

// Standard returns the named standard scenario. quick shortens it (for
// tests and -quick) without changing its shape. refP99 is the unloaded p99
// the settle criterion compares with (0 disables it).
func Standard(name string, quick bool, refP99 time.Duration) (Scenario, error) {
	d := 30 * time.Second
	if quick {
		d = 15 * time.Second
	}
	third := d / 3
	s := Scenario{Name: name, Duration: d, Warmup: 2 * time.Second, Bucket: 250 * time.Millisecond,
		Server:  Server{Workers: StdWorkers, Service: StdService, MinFraction: 0.5},
		Clients: Clients{Deadline: StdDeadline}, RefP99: refP99}
	rate := func(x float64) []RateStep { return []RateStep{{Rate: x * StdCapacity}} }
	switch name {
	case "unloaded":
		s.Clients.Rate = rate(0.5)
	case "overload2x":
		s.Clients.Rate = rate(2)
	case "overload10x":
		s.Clients.Rate = rate(10)
	case "capacity_drop":
		// Service time doubles for the middle third, under 1.5x load.
		s.Clients.Rate = rate(1.5)
		s.Server.Slowdown = []FactorStep{{At: third, Factor: 2}, {At: 2 * third, Factor: 1}}
		s.Change, s.Restore = third, 2*third
	case "slow_dependency":
		// A downstream adds 100ms to every request for the middle third,
		// without using a worker: more concurrency is needed, not less.
		s.Clients.Rate = rate(0.8)
		s.Server.Dependency = []DelayStep{{At: third, Delay: 100 * time.Millisecond}, {At: 2 * third}}
		s.Change, s.Restore = third, 2*third
	case "retry_storm":
		// Service time triples for 3s under 0.8x load; clients retry a shed
		// or timed-out attempt up to 3 times, without a budget.
		s.Clients.Rate = rate(0.8)
		s.Server.Slowdown = []FactorStep{{At: third, Factor: 3}, {At: third + 3*time.Second, Factor: 1}}
		s.Clients.Retry = Retry{Max: 3, Backoff: 20 * time.Millisecond, OnTimeout: true}
		s.Change, s.Restore = third, third+3*time.Second
	case "critical3x":
		// Three times the capacity, 30% of it critical: a controller that
		// knows priorities serves the critical 0.9x and sheds sheddable.
		s.Clients.Rate = rate(3)
		s.Clients.Critical = 0.3
	default:
		return Scenario{}, fmt.Errorf("sim: unknown scenario %q", name)
	}
	return s, nil
}

// ControllerNames lists the standard controllers in report order.
var ControllerNames = []string{"none", "static_oracle", "static_wrong", "aimd", "vegas", "gradient2", "sluice",
	"fifo", "lifo", "codel", "adaptive_lifo_codel", "priority"}

// NewAdaptive returns a controller running the named algorithm ("aimd",
// "vegas", "gradient2" or "sluice") in an adaptive.Limiter with default
// windows, every algorithm with limits [1, 1000] (4 for sluice's minimum)
// and an initial limit of 20; sluice without the scheduling signal, which
// virtual time cannot model (see the package doc).
func NewAdaptive(name string, seed uint64) (Controller, error) {
	var alg adaptive.Algorithm
	var err error
	switch name {
	case "aimd":
		alg, err = adaptive.NewAIMD(adaptive.WithLimits(1, 1000), adaptive.WithInitialLimit(20))
	case "vegas":
		alg, err = adaptive.NewVegas(adaptive.WithLimits(1, 1000), adaptive.WithInitialLimit(20), adaptive.WithSeed(seed))
	case "gradient2":
		alg, err = adaptive.NewGradient2(adaptive.WithLimits(1, 1000), adaptive.WithInitialLimit(20))
	case "sluice":
		alg, err = adaptive.NewDefault(adaptive.WithLimits(4, 1000), adaptive.WithInitialLimit(20), adaptive.WithoutSchedulingSignal())
	default:
		return nil, fmt.Errorf("sim: unknown adaptive controller %q", name)
	}
	if err != nil {
		return nil, err
	}
	l, err := adaptive.NewLimiter(alg)
	if err != nil {
		return nil, err
	}
	return Adaptive(l), nil
}

// oracleCandidates are the fixed limits the oracle tries, as multiples of
// the worker count.
var oracleCandidates = []float64{0.5, 0.75, 1, 1.25, 1.5, 2, 3, 4, 6, 8, 12}

// Oracle finds the best fixed limit for s by search over multiples of the
// worker count: the highest goodput, and among limits within 2% of it the
// lowest p99. It returns the limit and its Result. The candidates run in
// parallel; the choice is deterministic.
func Oracle(s Scenario, seed uint64) (int, Result, error) {
	results := make([]Result, len(oracleCandidates))
	limits := make([]int, len(oracleCandidates))
	err := parallel(len(oracleCandidates), func(i int) error {
		limits[i] = max(1, int(oracleCandidates[i]*float64(s.Server.Workers)+0.5))
		c, err := Static(limits[i])
		if err != nil {
			return err
		}
		results[i], err = Run(s, c, seed)
		return err
	})
	if err != nil {
		return 0, Result{}, err
	}
	best := 0
	for i, res := range results {
		if res.Goodput > results[best].Goodput*1.02 ||
			(res.Goodput >= results[best].Goodput*0.98 && (res.P99 < results[best].P99 ||
				res.P99 == results[best].P99 && res.Goodput > results[best].Goodput)) {
			best = i
		}
	}
	return limits[best], results[best], nil
}
