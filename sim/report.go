package sim

import (
	"bufio"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Report is the outcome of one controller in one scenario, as sluice-sim
// prints it.
type Report struct {
	Result
	// Limit is the mean limit over the measured period (0: none).
	Limit float64

	hasRestore bool
	waits      bool // the controller is a Waiter: report the wait
	mixed      bool // the scenario has critical and sheddable traffic
}

// Factory names a controller and builds a fresh one for each run; it is how
// controllers from other packages (queueing disciplines, composed
// controllers) join the standard comparison. New must not share state
// between the Controllers it returns.
type Factory struct {
	Name string
	New  func(s Scenario, seed uint64) (Controller, error)
}

// StandardScenarios returns the named standard scenarios with the settle
// reference set: the p99 of the unloaded scenario run without a controller
// with seed.
func StandardScenarios(names []string, quick bool, seed uint64) ([]Scenario, error) {
	unloaded, err := Standard("unloaded", quick, 0)
	if err != nil {
		return nil, err
	}
	ref, err := Run(unloaded, Unlimited(), seed)
	if err != nil {
		return nil, err
	}
	out := make([]Scenario, len(names))
	for i, name := range names {
		if out[i], err = Standard(name, quick, ref.P99); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RunFactories runs every scenario against a fresh controller from every
// factory with seed. Runs are independent and spread over GOMAXPROCS
// goroutines; results are deterministic and come back in scenario, then
// factory order.
func RunFactories(scenarios []Scenario, factories []Factory, seed uint64) ([]Report, error) {
	out := make([]Report, len(scenarios)*len(factories))
	err := parallel(len(out), func(k int) error {
		s, f := scenarios[k/len(factories)], factories[k%len(factories)]
		c, err := f.New(s, seed)
		if err != nil {
			return err
		}
		res, err := Run(s, c, seed)
		if err != nil {
			return err
		}
		res.Controller = f.Name
		w, ok := c.(Waiter)
		out[k] = Report{Result: res, Limit: meanLimit(s, res.Series), hasRestore: s.Restore > 0,
			waits: ok && w.Waits(), mixed: s.Clients.Critical > 0 && s.Clients.Critical < 1}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// StandardFactories returns the factories of the named standard controllers
// (see ControllerNames) for scenarios: static_oracle and static_wrong search
// the best fixed limit of each scenario once, here; the queueing
// controllers (QueueNames) wait in front of a limit at the scenario's
// worker count (see StandardQueue).
func StandardFactories(names []string, scenarios []Scenario, seed uint64) ([]Factory, error) {
	oracles := map[string]int{}
	var out []Factory
	for _, name := range names {
		switch name {
		case "none":
			out = append(out, Factory{name, func(Scenario, uint64) (Controller, error) { return Unlimited(), nil }})
		case "static_oracle", "static_wrong":
			if len(oracles) == 0 {
				for _, s := range scenarios {
					limit, _, err := Oracle(s, seed)
					if err != nil {
						return nil, err
					}
					oracles[s.Name] = limit
				}
			}
			factor := 1
			if name == "static_wrong" {
				factor = 4
			}
			out = append(out, Factory{name, func(s Scenario, _ uint64) (Controller, error) {
				limit, ok := oracles[s.Name]
				if !ok {
					return nil, fmt.Errorf("sim: no oracle limit for scenario %q", s.Name)
				}
				return Static(factor * limit)
			}})
		case "fifo", "lifo", "codel", "adaptive_lifo_codel", "priority":
			out = append(out, Factory{name, func(s Scenario, _ uint64) (Controller, error) {
				cfg, err := StandardQueue(name, s.Server.Workers)
				if err != nil {
					return nil, err
				}
				return NewQueue(cfg)
			}})
		case "aimd", "vegas", "gradient2", "sluice":
			out = append(out, Factory{name, func(_ Scenario, seed uint64) (Controller, error) { return NewAdaptive(name, seed) }})
		default:
			return nil, fmt.Errorf("sim: unknown controller %q", name)
		}
	}
	return out, nil
}

// RunStandard runs the named standard scenarios against the named standard
// controllers with seed: StandardScenarios, StandardFactories and
// RunFactories in one call.
func RunStandard(scenarios, controllers []string, quick bool, seed uint64) ([]Report, error) {
	specs, err := StandardScenarios(scenarios, quick, seed)
	if err != nil {
		return nil, err
	}
	factories, err := StandardFactories(controllers, specs, seed)
	if err != nil {
		return nil, err
	}
	return RunFactories(specs, factories, seed)
}

// parallel calls f(0..n-1) on up to GOMAXPROCS goroutines and returns the
// first error by index. It returns when all calls have.
func parallel(n int, f func(i int) error) error {
	errs := make([]error, n)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(n, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				errs[i] = f(i)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func meanLimit(s Scenario, series []Point) float64 {
	var sum float64
	var n int
	for _, p := range series {
		if p.T >= s.Warmup {
			sum += float64(p.Limit)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

func secs(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.2f", d.Seconds())
}

func millis(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/1e6) }

// Line formats r as one key=value line.
func (r Report) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario=%s controller=%s goodput=%.3f p50_ms=%s p99_ms=%s shed=%.3f settle_s=%s",
		r.Scenario, r.Controller, r.Goodput, millis(r.P50), millis(r.P99), r.Shed, secs(r.Settle))
	if r.hasRestore {
		fmt.Fprintf(&b, " recover_limit_s=%s recover_goodput_s=%s", secs(r.RecoverLimit), secs(r.RecoverGoodput))
	}
	fmt.Fprintf(&b, " offered=%.2f limit=%.1f", r.Offered, r.Limit)
	if r.waits {
		fmt.Fprintf(&b, " p99_wait_ms=%s", millis(r.P99Wait))
	}
	if r.mixed {
		fmt.Fprintf(&b, " critical_goodput=%.3f sheddable_goodput=%.3f", r.CriticalGoodput, r.SheddableGoodput)
	}
	return b.String()
}

// WriteCSV writes r's time series as CSV with a header line.
func (r Report) WriteCSV(w *bufio.Writer) error {
	if _, err := fmt.Fprintln(w, "t_s,offered_rps,attempts_rps,goodput_rps,shed_rps,late_rps,p99_ms,limit,capacity_rps"); err != nil {
		return err
	}
	for _, p := range r.Series {
		if _, err := fmt.Fprintf(w, "%.3f,%.1f,%.1f,%.1f,%.1f,%.1f,%s,%d,%.1f\n", p.T.Seconds(), p.Offered, p.Attempts,
			p.Goodput, p.Shed, p.Late, millis(p.P99), p.Limit, p.Capacity); err != nil {
			return err
		}
	}
	return nil
}
