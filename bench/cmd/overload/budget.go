package main

// budget is how a CPU-bound cell's server spent its CPU: what a request
// that did not run the work cost it, and the goodput that cost leaves
// room for at the cell's arrival rate.
type budget struct {
	// WorkUS (w) is the server's CPU time per admitted request, in µs:
	// what the calibration's server spent per request (all of them ran
	// the work there), or GOMAXPROCS / capacity when it was not measured.
	WorkUS float64 `json:"work_us"`
	// NoWorkUS (r) is the server's CPU time per request that reached its
	// handler chain but did not run the work, in µs, once each request
	// whose work ran is taken at w: (CPU - worked*w) / (requests - worked).
	NoWorkUS float64 `json:"no_work_us"`
	// Ceiling is the most goodput, as a share of capacity, of a server
	// whose CPUs are fully used at arrival rate λ when each admitted
	// request costs w and every other one r: x = (GOMAXPROCS - λr) / (w -
	// r) requests a second, x / capacity, within [0, min(1, λ/capacity)].
	Ceiling float64 `json:"ceiling"`
}

// minNoWork is the smallest share of a cell's requests that did not run
// the work for which budgetOf gives figures: over fewer, a few percent of
// error in the calibrated w is all that r would show.
const minNoWork = 0.05

// cpuBound reports whether the scenario called name has CPU-bound work,
// whose calibrated cost is GOMAXPROCS / capacity.
func cpuBound(name string) bool { return name == "cpu" || name == "mixed" }

// budgetOf returns the budget of c, a cell of a scenario of capacity
// requests a second whose calibration spent workUS of the server's CPU per
// request (0: not measured, GOMAXPROCS / capacity is taken); nil when the
// scenario is not CPU-bound, c failed, or too few of its requests did not
// run the work (minNoWork).
func budgetOf(c cell, capacity, workUS float64) *budget {
	st := c.Server
	noWork := st.Requests - st.Worked
	if !cpuBound(c.Scenario) || c.Err != "" || capacity <= 0 || st.GOMAXPROCS <= 0 || st.Requests <= 0 || noWork <= 0 ||
		float64(noWork) < minNoWork*float64(st.Requests) {
		return nil
	}
	procs := float64(st.GOMAXPROCS)
	w := workUS // µs of CPU per admitted request
	if w <= 0 {
		w = procs / capacity * 1e6
	}
	r := (float64(st.UserUS+st.SysUS) - float64(st.Worked)*w) / float64(noWork)
	most := min(1, c.Rate/capacity) // no more than arrives, no more than capacity
	ceiling := most
	if r < w {
		// x*w + (λ-x)*r = procs s of CPU a second, solved for x.
		x := (procs*1e6 - c.Rate*r) / (w - r)
		ceiling = min(most, max(0, x/capacity))
	}
	// else shedding saves nothing: admitting every arrival is the best.
	return &budget{WorkUS: w, NoWorkUS: r, Ceiling: ceiling}
}
