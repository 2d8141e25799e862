package sim

import (
	"fmt"
	"testing"
)

// TestQueueTargets checks the queueing issue's virtual-time targets on the
// -quick scenarios with seeds 1 to 3 (deterministic: a failure is a
// regression, not noise):
//   - overload2x: the p99 wait of served work under codel is at most 0.2x
//     that of an unbounded fifo, with goodput at least as high;
//   - critical3x: under priority, critical goodput >= 0.99 while sheddable
//     work absorbs the loss (it gets what capacity is left, and the server
//     stays busy with useful work).
func TestQueueTargets(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			var reports []Report
			for _, run := range []struct{ scenario, controller string }{
				{"overload2x", "fifo"}, {"overload2x", "codel"}, {"critical3x", "priority"},
			} {
				s, err := Standard(run.scenario, true, 0)
				if err != nil {
					t.Fatal(err)
				}
				f, err := StandardFactories([]string{run.controller}, nil, seed)
				if err != nil {
					t.Fatal(err)
				}
				r, err := RunFactories([]Scenario{s}, f, seed)
				if err != nil {
					t.Fatal(err)
				}
				reports = append(reports, r...)
			}
			fifo, codel, p := reports[0], reports[1], reports[2]
			if codel.P99Wait <= 0 || float64(codel.P99Wait) > 0.2*float64(fifo.P99Wait) {
				t.Errorf("overload2x: codel p99 wait %v, want > 0 and <= 0.2x fifo's %v", codel.P99Wait, fifo.P99Wait)
			}
			if codel.Goodput < fifo.Goodput || codel.Goodput < 0.95 {
				t.Errorf("overload2x: codel goodput %.3f, want >= fifo's %.3f and >= 0.95", codel.Goodput, fifo.Goodput)
			}
			if p.CriticalGoodput < 0.99 {
				t.Errorf("critical3x: critical goodput %.4f, want >= 0.99", p.CriticalGoodput)
			}
			// 30% of 3x is 0.9x of capacity: sheddable work gets about the
			// remaining 0.1x of its 2.1x (0.05 of it), and the server does not
			// idle or waste its time on late work.
			if p.SheddableGoodput > 0.1 || p.Goodput < 0.95 {
				t.Errorf("critical3x: sheddable goodput %.3f (want <= 0.1), goodput %.3f (want >= 0.95)", p.SheddableGoodput, p.Goodput)
			}
			for _, r := range reports {
				t.Log(r.Line())
			}
		})
	}
}
