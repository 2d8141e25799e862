package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"
)

// runConfig is the whole matrix the run role measures.
type runConfig struct {
	scenarios  []string
	multiples  []float64 // nil: each scenario's default
	contenders []string
	duration   time.Duration // of one cell
	warmup     time.Duration // of a cell, left out of its figures
	deadline   time.Duration
	rounds     int
	procs      int           // the server's GOMAXPROCS
	slots      int           // of the I/O endpoint
	service    time.Duration // of the I/O endpoint
	cpuWork    time.Duration // of the CPU endpoint, calibrated into sha256 rounds
	wait       time.Duration // the mixed endpoint's downstream wait
	proto      string
	client     string        // the load generator's HTTP/1.1 client: raw or go
	calibrate  time.Duration // of each closed-loop capacity measurement
	reject     bool          // also measure the server CPU per rejection
	rejectLoad float64       // at this multiple of the CPU endpoint's capacity
	admitRate  float64       // arrivals per second of the admission-cost cells
	seed       uint64
	h2Streams  int
	guardConns int // the sluice-guard contender's connection bound
	// bucket, when positive, has every open-loop cell reported in buckets
	// of this length too (cells.json: load.buckets), from its start, so
	// that what happened inside a cell (a start-up transient) can be read.
	bucket time.Duration
	// profileDir, when set, gets the server's CPU profile of every
	// open-loop cell, named after the cell.
	profileDir string
	self       selfCmd
}

// scenario is one endpoint under one kind of load.
type scenario struct {
	name      string
	rounds    int64
	wait      time.Duration
	slots     int
	drop      bool // the work per request doubles when the warm-up ends
	static    int  // the oracle's limit
	closed    int  // closed-loop clients that saturate the endpoint
	multiples []float64
	capacity  float64 // measured, requests per second (after the drop for drop)
	// workUS is the server's CPU time per request in the capacity
	// measurement (every request there runs the work), µs: the cost of an
	// admitted request in the CPU budget (budget.go).
	workUS float64
	before float64 // drop only: the capacity before the drop, which the load is a multiple of
	// recovery marks a recovery scenario (recovery.go): capacity is that
	// before the drop, after that after it.
	recovery bool
	after    float64
	unloaded float64 // recovery only: the unloaded p99 after the drop, µs
	// admit marks the admission-cost set (admit.go): its own contenders at
	// a fixed rate, no capacity, no multiples.
	admit bool
	// storm marks the storm scenario (storm.go): a stall of the generator
	// mid-cell, figures from buckets.
	storm bool
}

// cell is one contender at one multiple in one round.
type cell struct {
	Scenario  string      `json:"scenario"`
	Contender string      `json:"contender"`
	Multiple  float64     `json:"multiple"`
	Round     int         `json:"round"`
	Rate      float64     `json:"rate"`
	Load      loadResult  `json:"load"`
	Server    serverStats `json:"server"`
	// Budget is the cell's CPU budget (budget.go); nil where budgetOf
	// gives none.
	Budget *budget `json:"budget,omitempty"`
	Err    string  `json:"error,omitempty"`
}

func (c cell) completions() int64 {
	return c.Load.Good + c.Load.Shed + c.Load.Timeouts + c.Load.Errors
}

// report is everything a run measured.
type report struct {
	Started  time.Time          `json:"started"`
	Config   map[string]string  `json:"config"`
	Rounds   int64              `json:"sha256_rounds"`
	Capacity map[string]float64 `json:"capacity"`
	// Unloaded is the unloaded p99 (µs) after the drop of each recovery
	// scenario.
	Unloaded   map[string]float64 `json:"unloaded_p99_us,omitempty"`
	Warnings   []string           `json:"warnings"`
	Cells      []cell             `json:"cells"`
	scenarios  []scenario
	contenders []string
}

// runner runs cells.
type runner struct {
	cfg runConfig
	pin pinning
	log io.Writer
}

func newRunner(cfg runConfig, log io.Writer) (*runner, []string) {
	_, err := exec.LookPath("taskset")
	pin, warn := planPinning(cfg.procs, runtime.NumCPU(), err == nil)
	return &runner{cfg: cfg, pin: pin, log: log}, warn
}

// cellSpec is what one cell runs.
type cellSpec struct {
	sc        scenario
	contender string
	rate      float64
	closed    int
	duration  time.Duration
	from      time.Duration
	dropAt    time.Duration
	seed      uint64
	fresh     bool // a new connection per request
	// serverFrom, when positive, leaves the phase's start out of the
	// server's CPU time and counts too (from is the generator's).
	serverFrom time.Duration
	// thenRate from thenAt on, and buckets of bucket (see loadConfig).
	thenRate float64
	thenAt   time.Duration
	bucket   time.Duration
	// stall and stallAt stall the generator (see loadConfig).
	stall, stallAt time.Duration
}

// runCell starts a server and a load generator for spec and returns what
// they measured; both processes are gone when it returns.
func (r *runner) runCell(ctx context.Context, spec cellSpec) (loadResult, serverStats, error) {
	var st serverStats
	srvArgs := []string{
		"-role", "server", "-contender", spec.contender, "-static", strconv.Itoa(max(1, spec.sc.static)),
		"-rounds-per-request", strconv.FormatInt(spec.sc.rounds, 10), "-wait", spec.sc.wait.String(),
		"-slots", strconv.Itoa(spec.sc.slots), "-http", r.cfg.proto, "-h2-streams", strconv.Itoa(r.cfg.h2Streams),
		"-guard-conns", strconv.Itoa(max(1, r.cfg.guardConns)),
	}
	if spec.dropAt > 0 {
		srvArgs = append(srvArgs, "-drop-at", spec.dropAt.String())
	}
	if r.cfg.profileDir != "" && spec.closed == 0 {
		conn := "keepalive"
		if spec.fresh {
			conn = "dial"
		}
		name := fmt.Sprintf("%s-%s-%.0freqs-%s-seed%d.pprof", spec.sc.name, spec.contender, spec.rate, conn, spec.seed)
		srvArgs = append(srvArgs, "-cpuprofile", filepath.Join(r.cfg.profileDir, name))
	}
	env := []string{"GOMAXPROCS=" + strconv.Itoa(r.cfg.procs)}
	srv, err := startChild(ctx, r.cfg.self, r.pin.server, env, srvArgs...)
	if err != nil {
		return loadResult{}, st, err
	}
	defer srv.close()
	addr, err := srv.expect("ready ", 20*time.Second)
	if err != nil {
		return loadResult{}, st, err
	}
	ldArgs := []string{
		"-role", "load", "-url", "http://" + addr + "/", "-duration", spec.duration.String(),
		"-from", spec.from.String(), "-deadline", r.cfg.deadline.String(), "-http", r.cfg.proto,
		"-client", r.cfg.client, "-seed", strconv.FormatUint(spec.seed, 10),
	}
	if spec.fresh {
		ldArgs = append(ldArgs, "-fresh")
	}
	if spec.thenRate > 0 {
		ldArgs = append(ldArgs, "-then-rate", strconv.FormatFloat(spec.thenRate, 'f', 3, 64), "-then-at", spec.thenAt.String())
	}
	if spec.stall > 0 {
		ldArgs = append(ldArgs, "-stall", spec.stall.String(), "-stall-at", spec.stallAt.String())
	}
	if b := cmp.Or(spec.bucket, r.cfg.bucket); b > 0 && spec.closed == 0 {
		ldArgs = append(ldArgs, "-bucket", b.String())
	}
	if spec.closed > 0 {
		ldArgs = append(ldArgs, "-closed", strconv.Itoa(spec.closed))
	} else {
		ldArgs = append(ldArgs, "-rate", strconv.FormatFloat(spec.rate, 'f', 3, 64))
	}
	// The generator collects garbage less often: its CPU is what bounds the
	// rate it can offer once every request dials (the heap stays small).
	ld, err := startChild(ctx, r.cfg.self, r.pin.load, []string{"GOGC=400"}, ldArgs...)
	if err != nil {
		return loadResult{}, st, err
	}
	defer ld.close()
	if _, err := ld.expect("start", 20*time.Second); err != nil {
		return loadResult{}, st, err
	}
	begin := fmt.Sprintf("begin %d\n", int64(spec.duration))
	if spec.serverFrom > 0 {
		begin = fmt.Sprintf("begin %d %d\n", int64(spec.duration), int64(spec.serverFrom))
	}
	if _, err := io.WriteString(srv.stdin, begin); err != nil {
		return loadResult{}, st, err
	}
	res, err := ld.expect("result ", spec.duration+r.cfg.deadline+20*time.Second)
	if err != nil {
		return loadResult{}, st, err
	}
	var lr loadResult
	if err := json.Unmarshal([]byte(res), &lr); err != nil {
		return lr, st, fmt.Errorf("overload: load result: %w", err)
	}
	stats, err := srv.expect("stats ", 20*time.Second)
	if err != nil {
		return lr, st, err
	}
	if err := json.Unmarshal([]byte(stats), &st); err != nil {
		return lr, st, fmt.Errorf("overload: server stats: %w", err)
	}
	return lr, st, nil
}

// scenarios builds the scenarios of cfg; rounds is the calibrated sha256
// rounds of cfg.cpuWork.
func (cfg runConfig) buildScenarios(rounds int64) ([]scenario, error) {
	// The two endpoint kinds get the whole sweep; mixed and drop the
	// overloads only, so that the default run stays under ten minutes.
	sweep, hard := []float64{1, 2, 5, 10}, []float64{5, 10}
	var out []scenario
	for _, name := range cfg.scenarios {
		var sc scenario
		switch name {
		case "io":
			sc = scenario{name: name, wait: cfg.service, slots: cfg.slots, static: cfg.slots, closed: 4 * cfg.slots, multiples: sweep}
		case "cpu":
			sc = scenario{name: name, rounds: rounds, static: cfg.procs, closed: 16 * cfg.procs, multiples: sweep}
		case "mixed":
			// Little's law: procs CPUs each busy cpuWork of every cpuWork+wait.
			static := cfg.procs * int(math.Ceil(float64(cfg.cpuWork+cfg.wait)/float64(cfg.cpuWork)))
			sc = scenario{name: name, rounds: rounds, wait: cfg.wait, static: static, closed: 4 * static, multiples: hard}
		case "drop":
			sc = scenario{name: name, wait: cfg.service, slots: cfg.slots, drop: true, static: cfg.slots, closed: 4 * cfg.slots, multiples: hard}
		case "recovery":
			sc = scenario{name: name, wait: cfg.service, slots: cfg.slots, recovery: true, static: cfg.slots, closed: 4 * cfg.slots, multiples: []float64{5}}
		case "recovery-cpu":
			sc = scenario{name: name, rounds: rounds, recovery: true, static: cfg.procs, closed: 16 * cfg.procs, multiples: []float64{5}}
		case "storm":
			sc = scenario{name: name, rounds: rounds, storm: true, static: cfg.procs, closed: 16 * cfg.procs, multiples: []float64{10}}
		case "storm-io":
			sc = scenario{name: name, wait: cfg.service, slots: cfg.slots, storm: true, static: cfg.slots, closed: 4 * cfg.slots, multiples: []float64{10}}
		case admitScenario:
			out = append(out, scenario{name: name, static: 1, admit: true})
			continue
		default:
			return nil, fmt.Errorf("overload: unknown scenario %q (want io, cpu, mixed, drop, recovery, recovery-cpu, storm, storm-io, admit)", name)
		}
		if cfg.multiples != nil {
			sc.multiples = cfg.multiples
		}
		out = append(out, sc)
	}
	return out, nil
}

// capacityTries is how many closed-loop measurements the capacity is the
// best of: on a shared machine another process's burst only ever lowers a
// measurement, and one low capacity would make every multiple of a
// scenario a fraction of what it says.
const capacityTries = 3

// capacityOf measures the closed-loop throughput of sc's endpoint with no
// protection, the best of capacityTries: the 1x of its load; and the
// server's CPU time per request in that best measurement, in µs (0 when
// its server counted no request).
func (r *runner) capacityOf(ctx context.Context, sc scenario) (capacity, workUS float64, err error) {
	for range capacityTries {
		lr, st, err := r.runCell(ctx, cellSpec{sc: sc, contender: "none", closed: sc.closed, duration: r.cfg.calibrate, from: r.cfg.calibrate / 4, seed: r.cfg.seed})
		if err != nil {
			return 0, 0, err
		}
		if lr.WindowS > 0 && float64(lr.Good)/lr.WindowS > capacity {
			capacity, workUS = float64(lr.Good)/lr.WindowS, 0
			if st.Worked > 0 {
				workUS = float64(st.UserUS+st.SysUS) / float64(st.Worked)
			}
		}
	}
	if capacity == 0 {
		return 0, 0, fmt.Errorf("overload: %s answered nothing in calibration", sc.name)
	}
	return capacity, workUS, nil
}

// calibrateRoundsChild asks a pinned server process how many sha256 rounds
// take cfg.cpuWork of CPU.
func (r *runner) calibrateRoundsChild(ctx context.Context) (int64, error) {
	env := []string{"GOMAXPROCS=" + strconv.Itoa(r.cfg.procs)}
	c, err := startChild(ctx, r.cfg.self, r.pin.server, env, "-role", "server", "-calibrate-cpu", r.cfg.cpuWork.String())
	if err != nil {
		return 0, err
	}
	defer c.close()
	s, err := c.expect("rounds ", 60*time.Second)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

// run measures the whole matrix: calibration first, then the rounds, each
// running every contender once per cell in an order rotated per round.
func (r *runner) run(ctx context.Context) (*report, error) {
	cfg := r.cfg
	rep := &report{Started: time.Now().UTC(), Capacity: map[string]float64{}, contenders: cfg.contenders}
	rounds, err := r.calibrateRoundsChild(ctx)
	if err != nil {
		return nil, err
	}
	rep.Rounds = rounds
	fmt.Fprintf(r.log, "calibrated: %d sha256 rounds = %v of CPU in the server process\n", rounds, cfg.cpuWork)
	scs, err := cfg.buildScenarios(rounds)
	if err != nil {
		return nil, err
	}
	for i := range scs {
		sc := &scs[i]
		if sc.admit {
			continue // a fixed rate: no capacity to measure
		}
		c, w, err := r.capacityOf(ctx, *sc)
		if err != nil {
			return nil, err
		}
		sc.capacity, sc.workUS = c, w
		if sc.drop {
			sc.before = c
			after := *sc
			after.rounds, after.wait = 2*sc.rounds, 2*sc.wait
			if sc.capacity, sc.workUS, err = r.capacityOf(ctx, after); err != nil {
				return nil, err
			}
			rep.Capacity[sc.name+"-before"] = sc.before
		}
		if sc.recovery {
			after := *sc
			after.rounds, after.wait = 2*sc.rounds, 2*sc.wait
			if sc.after, _, err = r.capacityOf(ctx, after); err != nil {
				return nil, err
			}
			p99, err := r.unloadedP99(ctx, after)
			if err != nil {
				return nil, err
			}
			if rep.Unloaded == nil {
				rep.Unloaded = map[string]float64{}
			}
			sc.unloaded = p99
			rep.Capacity[sc.name+"-after"], rep.Unloaded[sc.name] = sc.after, p99
			fmt.Fprintf(r.log, "capacity %s after the drop: %.0f req/s; unloaded p99 %.1f ms\n", sc.name, sc.after, p99/1e3)
		}
		rep.Capacity[sc.name] = sc.capacity
		fmt.Fprintf(r.log, "capacity %s: %.0f req/s (closed loop, %d clients, no protection)\n", sc.name, sc.capacity, sc.closed)
	}
	rep.scenarios = scs

	var total int
	for _, sc := range scs {
		if sc.admit {
			total += len(admitContenders)
			continue
		}
		total += len(sc.multiples) * len(cfg.contenders)
	}
	total *= cfg.rounds
	started, done := time.Now(), 0
	for round := range cfg.rounds {
		for _, sc := range scs {
			if sc.admit {
				for _, c := range r.measureAdmit(ctx, round) {
					rep.Cells = append(rep.Cells, c)
					done++
					fmt.Fprintf(r.log, "[%d/%d] [admit] %s\n", done, total, c.costLine())
				}
				continue
			}
			for _, m := range sc.multiples {
				for _, name := range rotated(cfg.contenders, round) {
					if err := ctx.Err(); err != nil {
						return nil, err
					}
					c := r.measure(ctx, sc, name, m, round)
					rep.Cells = append(rep.Cells, c)
					done++
					eta := time.Duration(float64(time.Since(started)) / float64(done) * float64(total-done))
					fmt.Fprintf(r.log, "[%d/%d, %v left] %s\n", done, total, eta.Round(time.Second), c.line(sc))
				}
			}
		}
		if cfg.reject {
			capCPU, err := r.rejectCapacity(ctx, scs, rounds, rep)
			if err != nil {
				return nil, err
			}
			for _, c := range r.measureReject(ctx, capCPU, rounds, round) {
				rep.Cells = append(rep.Cells, c)
				fmt.Fprintf(r.log, "[reject] %s\n", c.costLine())
			}
		}
	}
	fmt.Fprintf(r.log, "done in %v\n", time.Since(rep.Started).Round(time.Second))
	return rep, nil
}

// rotated returns names in the order of round r: started r places later,
// so that over len(names) rounds each runs once in every position.
func rotated(names []string, r int) []string {
	out := make([]string, len(names))
	for i := range names {
		out[i] = names[(i+r)%len(names)]
	}
	return out
}

// measure runs one cell and turns a failure into a cell that says so.
func (r *runner) measure(ctx context.Context, sc scenario, name string, m float64, round int) cell {
	base := sc.capacity
	spec := cellSpec{sc: sc, contender: name, duration: r.cfg.duration, from: r.cfg.warmup, seed: r.cfg.seed + uint64(round)}
	if sc.drop {
		// The work doubles when the warm-up ends: the figures are of the
		// phase after the drop, at the same arrival rate.
		base = sc.before
		spec.dropAt = r.cfg.warmup
	}
	spec.rate = m * base
	switch {
	case sc.recovery:
		spec = r.recoverySpec(sc, spec, m)
	case sc.storm:
		spec = stormSpec(sc, spec, m)
	}
	c := cell{Scenario: sc.name, Contender: name, Multiple: m, Round: round, Rate: spec.rate}
	lr, st, err := r.runCell(ctx, spec)
	c.Load, c.Server = lr, st
	if err != nil {
		c.Err = err.Error()
	}
	if !sc.recovery && !sc.storm {
		c.Budget = budgetOf(c, sc.capacity, sc.workUS)
	}
	return c
}

// rejectScenario is the name of the rejection-cost cells.
const rejectScenario = "reject"

// rejectCapacity returns the CPU endpoint's capacity, measuring it (once
// per report) when the run has no cpu scenario.
func (r *runner) rejectCapacity(ctx context.Context, scs []scenario, rounds int64, rep *report) (float64, error) {
	for _, sc := range scs {
		if sc.name == "cpu" {
			return sc.capacity, nil
		}
	}
	if c, ok := rep.Capacity["cpu"]; ok {
		return c, nil
	}
	c, _, err := r.capacityOf(ctx, scenario{name: "cpu", rounds: rounds, closed: 16 * r.cfg.procs})
	if err != nil {
		return 0, err
	}
	rep.Capacity["cpu"] = c
	fmt.Fprintf(r.log, "capacity cpu: %.0f req/s (for the rejection cost)\n", c)
	return c, nil
}

// measureReject measures the server's CPU per answer on the way a
// request is refused or admitted: sluice's middleware shedding every
// request to the CPU endpoint at cfg.rejectLoad times its capacity
// (rejectName); the Guard answering every request before net/http reads
// it (earlyRejectName); the guard contender refusing every connection at accept
// (refuseName, with a new connection per request: the Guard answers
// nothing else); the pausing guard accepting none (pauseRefuseName: what
// a connection the server never accepts costs it, per request sent); sluice's Default middleware admitting every request to an
// empty 200 handler ("sluice-admit": the middleware's whole cost on a real
// request); and for the floor an empty handler with no protection at the
// same rate ("noop"). Each on keep-alive connections or with a new
// connection per request ("+dial", the dial storm of HTTP/1.1 clients
// that time out). Its figures are of the whole phase, as the server's CPU
// time is. The order rotates over rounds.
func (r *runner) measureReject(ctx context.Context, capCPU float64, rounds int64, round int) []cell {
	specs := []cellSpec{
		{sc: scenario{name: rejectScenario, rounds: rounds, static: 1}, contender: rejectName},
		{sc: scenario{name: rejectScenario, rounds: rounds, static: 1}, contender: earlyRejectName},
		{sc: scenario{name: rejectScenario, static: 1}, contender: "sluice"},
		{sc: scenario{name: rejectScenario, static: 1}, contender: "none"},
		{sc: scenario{name: rejectScenario, rounds: rounds, static: 1}, contender: rejectName, fresh: true},
		{sc: scenario{name: rejectScenario, rounds: rounds, static: 1}, contender: refuseName, fresh: true},
		{sc: scenario{name: rejectScenario, rounds: rounds, static: 1}, contender: pauseRefuseName, fresh: true},
		{sc: scenario{name: rejectScenario, static: 1}, contender: "none", fresh: true},
	}
	for i := range specs {
		specs[i].rate = r.cfg.rejectLoad * capCPU
	}
	return r.measureSet(ctx, rejectScenario, r.cfg.rejectLoad, specs, func(s cellSpec) string { return rejectLabel(s.contender, s.fresh) }, round)
}

// measureSet runs each of specs once for cfg.duration at its rate, in an
// order rotated by round, as cells of scenario at multiple named by label;
// a cell that fails says so in its Err.
func (r *runner) measureSet(ctx context.Context, scenario string, multiple float64, specs []cellSpec, label func(cellSpec) string, round int) []cell {
	var out []cell
	for i := range specs {
		spec := specs[(i+round)%len(specs)]
		spec.duration, spec.seed = r.cfg.duration, r.cfg.seed+uint64(round)
		c := cell{Scenario: scenario, Contender: label(spec), Multiple: multiple, Round: round, Rate: spec.rate}
		lr, st, err := r.runCell(ctx, spec)
		c.Load, c.Server = lr, st
		if err != nil {
			c.Err = err.Error()
		}
		out = append(out, c)
	}
	return out
}

// rejectLabels are the rejection-cost cells in the order of their table.
var rejectLabels = []string{rejectName, earlyRejectName, "sluice-admit", "noop", rejectName + "+dial", refuseName + "+dial", pauseRefuseName + "+dial", "noop+dial"}

func rejectLabel(contender string, fresh bool) string {
	l := contender
	switch contender {
	case "none":
		l = "noop"
	case "sluice":
		l = "sluice-admit"
	}
	if fresh {
		l += "+dial"
	}
	return l
}

// cpuPerAnswer is the server's CPU time per answer of the cell, in µs: per
// 2xx, 503 or refused connection (a connection the Guard closes before its
// request arrived is a transport error at the client); per request sent
// when none was answered (a server that accepts nothing).
func (c cell) cpuPerAnswer() float64 {
	n := c.Load.Good + c.Load.Shed + c.Load.Errors
	if n == 0 {
		n = c.Load.Sent
	}
	if n == 0 || c.Err != "" {
		return math.NaN()
	}
	return float64(c.Server.UserUS+c.Server.SysUS) / float64(n)
}

// costLine is the log line of a rejection- or admission-cost cell.
func (c cell) costLine() string {
	if c.Err != "" {
		return fmt.Sprintf("%s: error: %s", c.Contender, c.Err)
	}
	g := ""
	if st := c.Server.Guard; st != nil {
		g = fmt.Sprintf(", guard %+v", *st)
	}
	return fmt.Sprintf("%s: %d answers (%d shed, %d errors), server CPU %.1f µs per answer, %d dials, %d connections%s",
		c.Contender, c.Load.Good+c.Load.Shed+c.Load.Errors, c.Load.Shed, c.Load.Errors, c.cpuPerAnswer(), c.Load.Dials, c.Server.Conns, g)
}

func (c cell) line(sc scenario) string {
	if c.Err != "" {
		return fmt.Sprintf("%s %s %gx: error: %s", c.Scenario, c.Contender, c.Multiple, c.Err)
	}
	if sc.recovery {
		return fmt.Sprintf("%s %s %gx: %+v", c.Scenario, c.Contender, c.Multiple, recoveryOf(c, sc.unloaded))
	}
	if sc.storm {
		return fmt.Sprintf("%s %s %gx: %+v", c.Scenario, c.Contender, c.Multiple, stormOf(c, sc.capacity))
	}
	good := float64(c.Load.Good) / c.Load.WindowS
	b := ""
	if c.Budget != nil {
		b = fmt.Sprintf(" µs/no %.0f ceiling %.2f", c.Budget.NoWorkUS, c.Budget.Ceiling)
	}
	return fmt.Sprintf("%s %s %gx: goodput %.2f p50 %.1f ms p99 %.1f ms shed %.2f timeouts %d errors %d dials %d sent %d worked %d of %d%s",
		c.Scenario, c.Contender, c.Multiple, good/sc.capacity, float64(c.Load.P50US)/1e3, float64(c.Load.P99US)/1e3,
		float64(c.Load.Shed)/float64(max(1, c.completions())), c.Load.Timeouts, c.Load.Errors, c.Load.Dials, c.Load.Sent,
		c.Server.Worked, c.Server.Requests, b)
}
