// Command overload is the out-of-process overload benchmark: it compares
// sluice's adaptive limits with its peers' on an HTTP server that runs as
// its own process pinned to its own CPUs, driven by a load generator in a
// second process pinned to the others, so that the two never compete for a
// CPU or a Go scheduler.
//
// With -role run (the default) it re-executes itself as the two other
// roles for every cell of the matrix: first it calibrates the CPU work and
// each endpoint's capacity (closed loop, no protection), then it runs
// rounds, each running every contender once per scenario and load multiple
// in an order rotated per round, and prints one markdown table per scenario
// (medians with the min-max over rounds). With -out it writes the raw cells
// as JSON and one SVG per scenario.
//
//	go run ./cmd/overload                 # the full matrix, a few minutes
//	go run ./cmd/overload -quick          # a smoke run, under a minute
//	go run ./cmd/overload -scenarios cpu -http h2c -out results
//	go run ./cmd/overload -scenarios admit -reject=false   # what admitting a request costs, sluice beside its peers
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zeromicro/go-zero/core/logx"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, selfCmd{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// selfCmd is how the run role starts this program again: argv (empty:
// this executable) with env added to the environment.
type selfCmd struct {
	argv, env []string
	// started, when set, is told the pid of every child process.
	started func(pid int)
}

// run parses args and runs the role they name; the run role starts its
// children with self.
func run(args []string, in io.Reader, out, log io.Writer, self selfCmd) error {
	// go-zero's stat package prints a usage line every minute from import;
	// it would land in the benchmark's output.
	logx.DisableStat()
	fs := flag.NewFlagSet("overload", flag.ContinueOnError)
	fs.SetOutput(log)
	role := fs.String("role", "run", "run (the benchmark), or the roles it starts: server, load")
	// run
	scenarios := fs.String("scenarios", "io,cpu,mixed,drop", "comma-separated scenarios: io, cpu, mixed, drop, recovery, recovery-cpu, storm and storm-io (a stall of the generator at 10x, CPU and I/O endpoints: how long until goodput is back), admit (what each rate-limit middleware costs a request it admits)")
	multiples := fs.String("multiples", "", "comma-separated load multiples of capacity (default 1,2,5,10 for io and cpu, 5,10 for mixed and drop, 5 for recovery and recovery-cpu, 10 for storm and storm-io)")
	contenders := fs.String("contenders", strings.Join(defaultContenders, ","), "comma-separated contenders, of "+strings.Join(contenderNames, ","))
	duration := fs.Duration("duration", 1800*time.Millisecond, "length of one cell")
	warmup := fs.Duration("warmup", time.Second, "start of each cell left out of its figures (drop: when the work doubles); at least the deadline, or requests cannot time out in the window")
	deadline := fs.Duration("deadline", time.Second, "client deadline of each request")
	rounds := fs.Int("rounds", 3, "rounds of the whole matrix")
	procs := fs.Int("procs", 1, "GOMAXPROCS of the server, pinned to that many CPUs")
	slotsF := fs.Int("slots", 8, "slots of the I/O endpoint")
	service := fs.Duration("service", 20*time.Millisecond, "service time of the I/O endpoint")
	cpuWork := fs.Duration("cpu-work", time.Millisecond, "CPU per request of the CPU and mixed endpoints (calibrated into sha256 rounds)")
	waitF := fs.Duration("downstream", 10*time.Millisecond, "downstream wait of the mixed endpoint")
	proto := fs.String("http", "1", "HTTP version: 1 (HTTP/1.1) or h2c (HTTP/2 cleartext)")
	clientF := fs.String("client", "raw", "HTTP/1.1 client of the load generator on kept-alive connections: raw (a lean client, able to send 10x the CPU endpoint's capacity from one core) or go (net/http's Transport)")
	guardConns := fs.Int("guard-conns", DefaultGuardConns, "connection bound of the sluice-guard contender")
	h2Streams := fs.Int("h2-streams", 0, "concurrent streams per HTTP/2 connection the server allows (0: net/http's default, 250)")
	calib := fs.Duration("calibrate", time.Second, "length of each capacity measurement")
	reject := fs.Bool("reject", true, "also measure the server CPU per rejection")
	rejectLoad := fs.Float64("reject-load", 1, "load of the rejection-cost cells, a multiple of the CPU endpoint's capacity (at 5x on one core the dial storm of the start collapses the server in some runs, and the figure is that of the collapse)")
	admitRate := fs.Float64("admit-rate", 1000, "arrivals per second of the admission-cost cells (-scenarios admit): one fixed rate for every contender and run")
	seed := fs.Uint64("seed", 1, "seed of the arrivals")
	profileDir := fs.String("profile", "", "directory for the server's CPU profile of every open-loop cell (for go tool pprof)")
	outDir := fs.String("out", "", "directory for cells.json and one SVG per scenario")
	quick := fs.Bool("quick", false, "a smoke run: one round, short cells, 5x only")
	// server
	contender := fs.String("contender", "none", "server: the protection")
	static := fs.Int("static", 1, "server: the static contender's limit")
	roundsF := fs.Int64("rounds-per-request", 0, "server: sha256 rounds per request")
	wait := fs.Duration("wait", 0, "server: downstream wait per request")
	dropAt := fs.Duration("drop-at", 0, "server: when the work per request doubles")
	calCPU := fs.Duration("calibrate-cpu", 0, "server: print the sha256 rounds of this much CPU and exit")
	cpuProfile := fs.String("cpuprofile", "", "server: write the CPU profile of the phase to this file")
	// load
	url := fs.String("url", "", "load: the URL to send to")
	rate := fs.Float64("rate", 0, "load: Poisson arrivals per second")
	closed := fs.Int("closed", 0, "load: closed-loop clients instead of a rate")
	from := fs.Duration("from", 0, "load: start of the measured window")
	fresh := fs.Bool("fresh", false, "load: a new connection per request")
	thenRate := fs.Float64("then-rate", 0, "load: the arrival rate from -then-at on")
	thenAt := fs.Duration("then-at", 0, "load: when -then-rate takes over")
	bucketF := fs.Duration("bucket", 0, "report each open-loop cell in buckets of this length too, from its start (cells.json: load.buckets); the load role's buckets")
	stall := fs.Duration("stall", 0, "load: the generator sends nothing for this long from -stall-at on, then every arrival due meanwhile at once")
	stallAt := fs.Duration("stall-at", 0, "load: when the -stall begins")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch *role {
	case "server":
		return serve(serverConfig{
			contender: *contender, static: *static, rounds: *roundsF, wait: *wait, slots: *slotsF,
			dropAt: *dropAt, proto: *proto, h2Streams: *h2Streams, guardConns: *guardConns, sample: 50 * time.Millisecond, calibrateCPU: *calCPU, cpuProfile: *cpuProfile,
		}, in, out)
	case "load":
		res, err := drive(loadConfig{
			url: *url, rate: *rate, closed: *closed, duration: *duration, from: *from,
			deadline: *deadline, proto: *proto, client: *clientF, seed: *seed, fresh: *fresh,
			thenRate: *thenRate, thenAt: *thenAt, bucket: *bucketF, stall: *stall, stallAt: *stallAt,
		}, out)
		if err != nil {
			return err
		}
		return writeResult(out, res)
	case "run":
	default:
		return fmt.Errorf("overload: unknown role %q", *role)
	}

	cfg := runConfig{
		duration: *duration, warmup: *warmup, deadline: *deadline, rounds: *rounds, procs: *procs,
		slots: *slotsF, service: *service, cpuWork: *cpuWork, wait: *waitF, proto: *proto, client: *clientF,
		calibrate: *calib, reject: *reject, rejectLoad: *rejectLoad, admitRate: *admitRate, seed: *seed, self: self, h2Streams: *h2Streams, guardConns: *guardConns, profileDir: *profileDir, bucket: *bucketF,
	}
	cfg.scenarios = splitList(*scenarios)
	cfg.contenders = splitList(*contenders)
	if *multiples != "" {
		for _, s := range splitList(*multiples) {
			m, err := strconv.ParseFloat(s, 64)
			if err != nil || !(m > 0) || m > 1000 {
				return fmt.Errorf("overload: bad multiple %q", s)
			}
			cfg.multiples = append(cfg.multiples, m)
		}
	}
	if *quick {
		cfg.rounds, cfg.duration, cfg.warmup, cfg.calibrate = 1, 600*time.Millisecond, 200*time.Millisecond, 400*time.Millisecond
		if cfg.multiples == nil {
			cfg.multiples = []float64{5}
		}
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.profileDir != "" {
		if err := os.MkdirAll(cfg.profileDir, 0o755); err != nil {
			return err
		}
	}
	if len(cfg.self.argv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		cfg.self.argv = []string{exe}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, warnings := newRunner(cfg, log)
	for _, w := range warnings {
		fmt.Fprintln(log, "warning:", w)
	}
	fmt.Fprintf(log, "server on CPUs %q with GOMAXPROCS %d, load generator on CPUs %q; HTTP %s\n", r.pin.server, cfg.procs, r.pin.load, cfg.proto)
	rep, err := r.run(ctx)
	if err != nil {
		return err
	}
	rep.Warnings = warnings
	rep.Config = map[string]string{"args": strings.Join(args, " "), "http": cfg.proto, "client": cfg.client, "procs": strconv.Itoa(cfg.procs),
		"slots": strconv.Itoa(cfg.slots), "duration": cfg.duration.String(), "warmup": cfg.warmup.String(),
		"rounds": strconv.Itoa(cfg.rounds), "deadline": cfg.deadline.String(), "cpu-work": cfg.cpuWork.String(), "h2-streams": strconv.Itoa(cfg.h2Streams), "guard-conns": strconv.Itoa(cfg.guardConns), "reject-load": strconv.FormatFloat(cfg.rejectLoad, 'g', -1, 64), "admit-rate": strconv.FormatFloat(cfg.admitRate, 'g', -1, 64), "pin-server": r.pin.server, "pin-load": r.pin.load}
	writeTables(out, rep)
	if *outDir != "" {
		return writeFiles(*outDir, rep)
	}
	return nil
}

func (cfg runConfig) validate() error {
	switch {
	case cfg.duration <= 0 || cfg.warmup < 0 || cfg.warmup >= cfg.duration:
		return errors.New("overload: want 0 <= warmup < duration")
	case cfg.deadline <= 0 || cfg.calibrate <= 0 || cfg.rounds < 1 || cfg.rounds > 100:
		return errors.New("overload: want a positive deadline and calibration, and 1 to 100 rounds")
	case !(cfg.rejectLoad > 0) || cfg.rejectLoad > 1000:
		return errors.New("overload: want a reject-load in (0, 1000]")
	case !(cfg.admitRate > 0) || cfg.admitRate > 100_000:
		return errors.New("overload: want an admit-rate in (0, 100000] requests per second")
	case cfg.guardConns < 1:
		return errors.New("overload: want a guard-conns of at least 1")
	case cfg.bucket < 0 || cfg.bucket >= cfg.duration:
		return errors.New("overload: want 0 <= bucket < duration")
	case cfg.h2Streams < 0 || cfg.h2Streams > 1<<20:
		return errors.New("overload: want 0 to 2^20 HTTP/2 streams")
	case cfg.procs < 1 || cfg.slots < 1 || cfg.service <= 0 || cfg.cpuWork <= 0 || cfg.wait <= 0:
		return errors.New("overload: want positive procs, slots, service, cpu-work and downstream")
	case len(cfg.contenders) == 0 || len(cfg.scenarios) == 0:
		return errors.New("overload: want at least one contender and one scenario")
	}
	for _, c := range cfg.contenders {
		if !slices.Contains(contenderNames, c) {
			return fmt.Errorf("overload: unknown contender %q (want some of %s)", c, strings.Join(contenderNames, ","))
		}
	}
	if _, err := protocols(cfg.proto); err != nil {
		return err
	}
	_, err := cfg.buildScenarios(1)
	return err
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
