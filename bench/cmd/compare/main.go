// Command compare runs the side-by-side benchmarks of this module so that
// no figure depends on what ran before it in the same process: it builds the
// test binary once, runs every sub-benchmark in a process of its own, in an
// order rotated from round to round, and prints medians with the min-max
// spread over rounds and the ratios peer time / sluice time of one run.
//
// A benchmark that runs in the same process as others inherits their heap,
// their GC pacing and the state of the CPU caches they left; in one process
// BenchmarkMiddleware/bare came out slower than a middleware doing strictly
// more work. One process per case and interleaved rounds remove the order
// from the figures; the spread says how much the machine moved.
//
//	go run ./cmd/compare                                  # the default set, 5 rounds
//	go run ./cmd/compare -bench 'Keyed1e6Allow' -benchtime 2000000x
//	go run ./cmd/compare -rounds 7 -readme README.md      # rewrite the README's table
//	go run ./cmd/compare -cpu 1,2,4,8,16 -bench 'GlobalCap|TokenBucketAllow'
//	go run ./cmd/compare -binary new=./new.test,old=./old.test   # a change, before and after
//
// With several binaries (test binaries of this package built from
// different versions of sluice) every case runs on each, interleaved in
// the same rounds, and each implementation's row is named impl@label; the
// baseline is then the sluice row of the first binary.
//
// Within each group (one benchmark, one variant such as serial or
// parallel, one GOMAXPROCS) the baseline is the implementation named
// "sluice", or else the first whose name starts with "sluice"; each row's x
// is its median time over the baseline's. Where the group has an
// implementation named "bare" (a handler without middleware), each row also
// shows its overhead over bare, computed per round from the two processes
// of that round, and the ratio of overheads.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// defaultBench is the set the README's comparison table is made of.
const defaultBench = "TryAcquireRelease|TokenBucketAllow|GlobalCap|Keyed1e6Allow|Keyed1e6Layered|ShedGlobalCap|Middleware"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

type config struct {
	bench     *regexp.Regexp
	benchtime string
	// times overrides benchtime per top-level benchmark (its name without
	// the Benchmark prefix).
	times  map[string]string
	cpus   []int
	rounds int
	pkg    string
	// binaries are the test binaries to run, each under a label (empty
	// when there is one binary).
	binaries []binary
	readme   string
	filter   *regexp.Regexp // keeps only the cases whose full name matches
}

func parseArgs(args []string, log io.Writer) (config, error) {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(log)
	bench := fs.String("bench", defaultBench, "regexp of the top-level benchmarks (without the Benchmark prefix)")
	filter := fs.String("filter", "", "regexp a case's full name (Benchmark.../impl/variant) must match to run")
	benchtime := fs.String("benchtime", "300ms,Keyed1e6Allow=2000000x,Keyed1e6Layered=1000000x", "the -test.benchtime of each process: a default, then Name=value overrides, comma-separated")
	cpu := fs.String("cpu", "2", "comma-separated GOMAXPROCS values; each is a case of its own")
	rounds := fs.Int("rounds", 5, "rounds; each runs every case once, in its own process")
	pkg := fs.String("pkg", ".", "the package whose benchmarks to run")
	binaries := fs.String("binary", "", "test binaries built beforehand (go test -c), comma-separated, each label=path when there are several; default: build one")
	readme := fs.String("readme", "", "a markdown file whose table between the compare markers to rewrite")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	cfg := config{benchtime: "", times: map[string]string{}, rounds: *rounds, pkg: *pkg, readme: *readme}
	if *binaries != "" {
		for _, f := range strings.Split(*binaries, ",") {
			label, path, ok := strings.Cut(f, "=")
			if !ok {
				label, path = "", f
			}
			if path == "" || (ok && label == "") || strings.ContainsAny(label, "/@ ") {
				return config{}, fmt.Errorf("compare: bad -binary element %q", f)
			}
			cfg.binaries = append(cfg.binaries, binary{label: label, path: path})
		}
		if len(cfg.binaries) > 1 {
			for _, b := range cfg.binaries {
				if b.label == "" {
					return config{}, errors.New("compare: with several -binary values, each needs a label=")
				}
			}
		}
	}
	var err error
	if cfg.bench, err = regexp.Compile("^Benchmark(" + *bench + ")$"); err != nil {
		return config{}, fmt.Errorf("compare: bad -bench: %w", err)
	}
	if *filter != "" {
		if cfg.filter, err = regexp.Compile(*filter); err != nil {
			return config{}, fmt.Errorf("compare: bad -filter: %w", err)
		}
	}
	for _, f := range strings.Split(*benchtime, ",") {
		name, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		switch {
		case !ok && cfg.benchtime == "":
			cfg.benchtime = name
		case ok && name != "" && v != "":
			cfg.times["Benchmark"+name] = v
		default:
			return config{}, fmt.Errorf("compare: bad -benchtime element %q", f)
		}
	}
	if cfg.benchtime == "" {
		return config{}, errors.New("compare: -benchtime needs a default value")
	}
	for _, f := range strings.Split(*cpu, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1024 {
			return config{}, fmt.Errorf("compare: bad -cpu value %q", f)
		}
		cfg.cpus = append(cfg.cpus, n)
	}
	if cfg.rounds < 1 || cfg.rounds > 100 {
		return config{}, fmt.Errorf("compare: want 1 to 100 rounds, got %d", cfg.rounds)
	}
	return cfg, nil
}

func run(ctx context.Context, args []string, out, log io.Writer) error {
	cfg, err := parseArgs(args, log)
	if err != nil {
		return err
	}
	if len(cfg.binaries) == 0 {
		dir, err := os.MkdirTemp("", "compare")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "bench.test")
		build := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, cfg.pkg)
		build.Stdout, build.Stderr = log, log
		fmt.Fprintln(log, "building", cfg.pkg)
		if err := build.Run(); err != nil {
			return fmt.Errorf("compare: go test -c: %w", err)
		}
		cfg.binaries = []binary{{path: bin}}
	}
	cases, err := discover(ctx, cfg, log)
	if err != nil {
		return err
	}
	if len(cases) == 0 {
		return errors.New("compare: no benchmark matches")
	}
	fmt.Fprintf(log, "%d cases, %d rounds\n", len(cases), cfg.rounds)
	results := make([][]result, len(cases)) // per case, per round
	start := time.Now()
	for r := range cfg.rounds {
		for k := range cases {
			// Rotate the order by a different offset each round, so that
			// no case always follows the same neighbour.
			i := (k + r*len(cases)/cfg.rounds) % len(cases)
			if r%2 == 1 {
				i = len(cases) - 1 - i
			}
			c := cases[i]
			res, err := runCase(ctx, c, cfg)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				// One failed process (a benchmark's own check, on a busy
				// machine) costs its figure, not the run: the table says
				// how many failed.
				fmt.Fprintln(log, "warning:", err)
				res = result{failed: true}
			}
			res.round = r
			results[i] = append(results[i], res)
		}
		fmt.Fprintf(log, "round %d/%d done after %s\n", r+1, cfg.rounds, time.Since(start).Round(time.Second))
	}
	table := report(cases, results, cfg)
	if _, err := io.WriteString(out, table); err != nil {
		return err
	}
	if cfg.readme != "" {
		return rewriteReadme(cfg.readme, table)
	}
	return nil
}

// binary is a test binary and its label.
type binary struct{ label, path string }

// benchCase is one sub-benchmark at one GOMAXPROCS on one binary: what one
// process runs.
type benchCase struct {
	// path is the name split at its slashes: the top-level benchmark, the
	// implementation, then the variant (possibly several parts).
	path []string
	cpu  int
	bin  binary
}

func (c benchCase) name() string { return strings.Join(c.path, "/") }

// pattern is the -test.bench argument that matches c alone.
func (c benchCase) pattern() string {
	parts := make([]string, len(c.path))
	for i, p := range c.path {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// discover lists the top-level benchmarks that cfg.bench matches, then runs
// each once with -test.benchtime 1x to learn its sub-benchmarks' names. The
// first binary names the cases; every binary runs each.
func discover(ctx context.Context, cfg config, log io.Writer) ([]benchCase, error) {
	bin := cfg.binaries[0].path
	list, err := exec.CommandContext(ctx, bin, "-test.list", ".").Output()
	if err != nil {
		return nil, fmt.Errorf("compare: listing the benchmarks: %w", err)
	}
	var cases []benchCase
	for _, top := range strings.Fields(string(list)) {
		if !cfg.bench.MatchString(top) {
			continue
		}
		fmt.Fprintln(log, "discovering", top)
		cmd := exec.CommandContext(ctx, bin, "-test.run", "^$", "-test.bench", "^"+top+"$",
			"-test.benchtime", "1x", "-test.cpu", "1")
		o, err := cmd.CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("compare: discovering %s: %w\n%s", top, err, o)
		}
		for _, l := range parseLines(string(o), 1) {
			for _, cpu := range cfg.cpus {
				for _, b := range cfg.binaries {
					c := benchCase{path: strings.Split(l.name, "/"), cpu: cpu, bin: b}
					if cfg.filter == nil || cfg.filter.MatchString(c.name()) {
						cases = append(cases, c)
					}
				}
			}
		}
	}
	return cases, nil
}

// result is one process's figures for its case.
type result struct {
	round   int
	failed  bool
	metrics map[string]float64 // unit -> value: ns/op, B/op, allocs/op, ...
}

func runCase(ctx context.Context, c benchCase, cfg config) (result, error) {
	bt := cfg.benchtime
	if v, ok := cfg.times[c.path[0]]; ok {
		bt = v
	}
	cmd := exec.CommandContext(ctx, c.bin.path, "-test.run", "^$", "-test.bench", c.pattern(),
		"-test.benchtime", bt, "-test.cpu", strconv.Itoa(c.cpu), "-test.benchmem")
	o, err := cmd.CombinedOutput()
	if err != nil {
		return result{}, fmt.Errorf("compare: %s (GOMAXPROCS %d, %s): %w\n%s", c.name(), c.cpu, c.bin.path, err, o)
	}
	for _, l := range parseLines(string(o), c.cpu) {
		if l.name == c.name() {
			return result{metrics: l.metrics}, nil
		}
	}
	return result{}, fmt.Errorf("compare: %s (GOMAXPROCS %d) printed no result:\n%s", c.name(), c.cpu, o)
}

// line is one parsed benchmark result line.
type line struct {
	name    string // without the -GOMAXPROCS suffix
	metrics map[string]float64
}

// parseLines parses the result lines of go test -bench output run with
// GOMAXPROCS cpu: "BenchmarkX/a/b-2  1000  12.5 ns/op  0 B/op ...".
func parseLines(out string, cpu int) []line {
	var lines []line
	suffix := "-" + strconv.Itoa(cpu)
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := f[0]
		if cpu != 1 {
			var ok bool
			if name, ok = strings.CutSuffix(name, suffix); !ok {
				continue
			}
		}
		m := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				m = nil
				break
			}
			m[f[i+1]] = v
		}
		if _, ok := m["ns/op"]; ok {
			lines = append(lines, line{name: name, metrics: m})
		}
	}
	return lines
}
