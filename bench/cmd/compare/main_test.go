package main

import (
	"regexp"
	"strings"
	"testing"
)

func TestParseLinesStripsTheProcsSuffixAndReadsEveryMetric(t *testing.T) {
	out := `goos: linux
BenchmarkGlobalCap/sluice-sharded/serial-2   	 1000000	        12.50 ns/op	       0 B/op	       0 allocs/op
BenchmarkMiddleware/bare-5fields-2           	  200000	      1505 ns/op	      3.0 cpu-ns/op	     512 B/op	       7 allocs/op
BenchmarkOther-4                             	     100	        10.0 ns/op
PASS
`
	got := parseLines(out, 2)
	if len(got) != 2 {
		t.Fatalf("parsed %d lines, want 2: %+v", len(got), got)
	}
	if got[0].name != "BenchmarkGlobalCap/sluice-sharded/serial" || got[0].metrics["ns/op"] != 12.5 || got[0].metrics["allocs/op"] != 0 {
		t.Errorf("first line: %+v", got[0])
	}
	if got[1].name != "BenchmarkMiddleware/bare-5fields" || got[1].metrics["cpu-ns/op"] != 3 || got[1].metrics["allocs/op"] != 7 {
		t.Errorf("second line: %+v", got[1])
	}
	if one := parseLines("BenchmarkX/a-2 10 5 ns/op\n", 1); len(one) != 1 || one[0].name != "BenchmarkX/a-2" {
		t.Errorf("GOMAXPROCS 1 has no suffix to strip: %+v", one)
	}
}

func TestPatternMatchesTheCaseAlone(t *testing.T) {
	c := benchCase{path: []string{"BenchmarkGlobalCap", "sluice-sharded", "serial"}, cpu: 2}
	parts := strings.Split(c.pattern(), "/")
	for i, name := range []string{"BenchmarkGlobalCap", "sluice-sharded", "serial"} {
		re := regexp.MustCompile(parts[i])
		if !re.MatchString(name) {
			t.Errorf("part %d %q does not match %q", i, parts[i], name)
		}
	}
	if regexp.MustCompile(parts[1]).MatchString("sluice-sharded2") || regexp.MustCompile(parts[1]).MatchString("sluice") {
		t.Errorf("part %q matches another implementation", parts[1])
	}
}

func TestMedianOfOddAndEvenCounts(t *testing.T) {
	if m, lo, hi := median([]float64{5, 1, 3}); m != 3 || lo != 1 || hi != 5 {
		t.Errorf("median(5,1,3) = %v (%v-%v)", m, lo, hi)
	}
	if m, _, _ := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median(4,1,3,2) = %v, want 2.5", m)
	}
}

func TestReportTakesRatiosAndOverheadsPerRound(t *testing.T) {
	cases := []benchCase{
		{path: []string{"BenchmarkMiddleware", "bare"}, cpu: 2},
		{path: []string{"BenchmarkMiddleware", "sluice"}, cpu: 2},
		{path: []string{"BenchmarkMiddleware", "peer"}, cpu: 2},
	}
	ns := func(r int, v float64) result {
		return result{round: r, metrics: map[string]float64{"ns/op": v, "allocs/op": 1, "cpu-ns/op": v / 2}}
	}
	// Round 1 is slow for everyone: the overheads, taken per round, stay.
	results := [][]result{
		{ns(0, 100), ns(1, 200), ns(2, 100)},
		{ns(0, 150), ns(1, 250), ns(2, 150)},
		{ns(0, 200), ns(1, 300), ns(2, 200)},
	}
	got := report(cases, results, config{rounds: 3})
	delete(results[0][0].metrics, "cpu-ns/op")
	delete(results[0][1].metrics, "cpu-ns/op")
	delete(results[0][2].metrics, "cpu-ns/op")
	if got := report(cases, results, config{rounds: 3}); !strings.Contains(got, "| bare | 100 (100-200) | 1 | 0.67 | - | | |") {
		t.Errorf("a metric a row lacks is not a dash:\n%s", got)
	}
	failed := append([][]result{}, results...)
	failed[2] = []result{ns(0, 200), {round: 1, failed: true}, ns(2, 200)}
	if f := report(cases, failed, config{rounds: 3}); !strings.Contains(f, "| peer (1 of 3 runs failed) | 200 (200-200) | 1 | 1.33 | 100 (100-100), x 1.33 | 100 (100-100) | 2.00 |") {
		t.Errorf("a failed run is not left out and counted:\n%s", f)
	}
	for _, want := range []string{
		"| sluice * | 150 (150-250) | 1 | 1.00 | 75 (75-125), x 1.00 | 50 (50-50) | 1.00 |",
		"| peer | 200 (200-300) | 1 | 1.33 | 100 (100-150), x 1.33 | 100 (100-100) | 2.00 |",
		"| bare | 100 (100-200) | 1 | 0.67 | 50 (50-100), x 0.67 | | |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}

func TestReplaceBetweenKeepsWhatIsOutsideTheMarkers(t *testing.T) {
	doc := "head\n" + beginMarker + "\nold\n" + endMarker + "\ntail\n"
	got, err := replaceBetween([]byte(doc), "new\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "head\n" + beginMarker + "\nnew\n" + endMarker + "\ntail\n"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := replaceBetween([]byte("no markers"), "x"); err == nil {
		t.Error("a document without markers was accepted")
	}
}

func TestParseArgsRejectsBadValues(t *testing.T) {
	for _, args := range [][]string{
		{"-rounds", "0"}, {"-cpu", "0"}, {"-cpu", "x"}, {"-benchtime", "A=1x"}, {"-benchtime", "1s,=2"}, {"-bench", "("},
		{"-binary", "a.test,b.test"}, {"-binary", "=a.test"}, {"-binary", "x@y=a.test,z=b.test"},
	} {
		if _, err := parseArgs(args, &strings.Builder{}); err == nil {
			t.Errorf("parseArgs(%q) accepted", args)
		}
	}
	cfg, err := parseArgs([]string{"-benchtime", "100ms,Keyed1e6Allow=10x", "-binary", "new=n.test,old=o.test"}, &strings.Builder{})
	if err != nil || cfg.benchtime != "100ms" || cfg.times["BenchmarkKeyed1e6Allow"] != "10x" ||
		len(cfg.binaries) != 2 || cfg.binaries[1] != (binary{label: "old", path: "o.test"}) {
		t.Errorf("parseArgs: %+v, %v", cfg, err)
	}
	if got := impl(benchCase{path: []string{"BenchmarkX", "sluice", "serial"}, bin: cfg.binaries[1]}); got != "sluice@old" {
		t.Errorf("impl = %q, want sluice@old", got)
	}
}
