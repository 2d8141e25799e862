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
}

// RunStandard runs every named scenario against every named controller with
// seed. The unloaded scenario is run first without a controller to obtain
// the reference p99. Runs are independent and spread over GOMAXPROCS
// goroutines; results are deterministic and come back in scenario, then
// controller order.
func RunStandard(scenarios, controllers []string, quick bool, seed uint64) ([]Report, error) {
	unloaded, err := Standard("unloaded", quick, 0)
	if err != nil {
		return nil, err
	}
	ref, err := Run(unloaded, Unlimited(), seed)
	if err != nil {
		return nil, err
	}
	specs := make([]Scenario, len(scenarios))
	oracles := make([]int, len(scenarios))
	needOracle := false
	for _, c := range controllers {
		needOracle = needOracle || c == "static_oracle" || c == "static_wrong"
	}
	for i, name := range scenarios {
		if specs[i], err = Standard(name, quick, ref.P99); err != nil {
			return nil, err
		}
		if needOracle {
			if oracles[i], _, err = Oracle(specs[i], seed); err != nil {
				return nil, err
			}
		}
	}
	out := make([]Report, len(scenarios)*len(controllers))
	err = parallel(len(out), func(k int) error {
		s, cname := specs[k/len(controllers)], controllers[k%len(controllers)]
		var c Controller
		var err error
		switch cname {
		case "none":
			c = Unlimited()
		case "static_oracle":
			c, err = Static(oracles[k/len(controllers)])
		case "static_wrong":
			c, err = Static(4 * oracles[k/len(controllers)])
		default:
			c, err = NewAdaptive(cname, seed)
		}
		if err != nil {
			return err
		}
		res, err := Run(s, c, seed)
		if err != nil {
			return err
		}
		res.Controller = cname
		out[k] = Report{Result: res, Limit: meanLimit(s, res.Series), hasRestore: s.Restore > 0}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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
