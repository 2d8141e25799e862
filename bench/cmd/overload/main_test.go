package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// childEnv marks a test binary started as one of the benchmark's roles.
const childEnv = "SLUICE_OVERLOAD_CHILD=1"

// TestMain lets the run role re-execute the test binary as its server and
// load generator, as it re-executes the command.
func TestMain(m *testing.M) {
	if os.Getenv("SLUICE_OVERLOAD_CHILD") == "1" {
		if err := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, selfCmd{}); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRunTinyMatrixReportsEveryCellAndLeavesNoProcess runs the whole
// pipeline on a tiny matrix (two contenders, one multiple, short cells):
// calibration, the cells in their own processes, the rejection cost, the
// table, cells.json and an SVG; and no child process outlives the run.
func TestRunTinyMatrixReportsEveryCellAndLeavesNoProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and runs for a few seconds")
	}
	dir := t.TempDir()
	var (
		mu   sync.Mutex
		pids []int
	)
	self := selfCmd{argv: []string{os.Args[0]}, env: []string{childEnv}, started: func(pid int) {
		mu.Lock()
		pids = append(pids, pid)
		mu.Unlock()
	}}
	var out, log bytes.Buffer
	args := []string{
		"-scenarios", "io", "-contenders", "none,static", "-multiples", "2", "-rounds", "1",
		"-duration", "400ms", "-warmup", "100ms", "-calibrate", "300ms", "-slots", "2", "-service", "5ms",
		"-bucket", "100ms", "-out", dir,
	}
	if err := run(args, strings.NewReader(""), &out, &log, self); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	table := out.String()
	for _, want := range []string{"| none | 2x |", "| static | 2x |", "#### io:", "cost of a rejection", "a new connection per request", "connguard refusing at accept", "connguard answering early", "connguard pausing", "sluice middleware (Default, admitting)"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "failed") {
		t.Errorf("a cell failed:\n%s\n%s", table, log.String())
	}

	rep := readReport(t, dir)
	if len(rep.Cells) != 2+len(rejectLabels) { // two contenders, then the rejection cost
		t.Fatalf("got %d cells, want %d", len(rep.Cells), 2+len(rejectLabels))
	}
	for _, c := range rep.Cells {
		if strings.HasPrefix(c.Contender, pauseRefuseName) {
			// It accepts nothing: every request times out unanswered.
			if c.Err != "" || c.Load.Sent == 0 || c.Load.Good+c.Load.Shed != 0 || c.Server.Conns != 0 || c.Server.Guard == nil || c.Server.Guard.Accepted != 0 {
				t.Errorf("cell %s/%s: %+v, want every request sent and none accepted", c.Scenario, c.Contender, c)
			}
			continue
		}
		if c.Err != "" || c.Load.Sent == 0 || c.Load.Good+c.Load.Shed == 0 || c.Server.UserUS+c.Server.SysUS <= 0 {
			t.Errorf("cell %s/%s measured nothing: %+v", c.Scenario, c.Contender, c)
		}
		if len(c.Load.Buckets) != 4 { // -bucket: the 400ms cell in four
			t.Errorf("cell %s/%s: %d buckets, want 4", c.Scenario, c.Contender, len(c.Load.Buckets))
		}
		all := strings.HasPrefix(c.Contender, rejectName) || strings.HasPrefix(c.Contender, refuseName)
		if all && c.Load.Good != 0 {
			t.Errorf("%s answered %d requests with 2xx; it must shed all", c.Contender, c.Load.Good)
		}
		// The server counts the requests whose work ran: none where every
		// request is shed, few where the Guard answers them, some and at
		// most those that reached it elsewhere.
		switch {
		case strings.HasPrefix(c.Contender, earlyRejectName):
			// Only a request whose arrival the host did not stamp yet runs
			// the work.
			if c.Server.Worked < 0 || c.Server.Worked > c.Server.Requests || c.Server.Guard == nil || c.Server.Guard.EarlyAnswers == 0 {
				t.Errorf("%s: the work ran %d times for %d requests, %+v answered early; want some answered early", c.Contender, c.Server.Worked, c.Server.Requests, c.Server.Guard)
			}
		case all:
			if c.Server.Worked != 0 {
				t.Errorf("%s: the work ran %d times; it must shed all", c.Contender, c.Server.Worked)
			}
		default:
			if c.Server.Worked <= 0 || c.Server.Worked > c.Server.Requests {
				t.Errorf("cell %s/%s: the work ran %d times for %d requests, want some and at most all", c.Scenario, c.Contender, c.Server.Worked, c.Server.Requests)
			}
		}
		if answered := c.Load.Good + c.Load.Shed; strings.HasSuffix(c.Contender, "+dial") && c.Load.Dials < answered {
			t.Errorf("%s: %d dials for %d answers, want one per request", c.Contender, c.Load.Dials, answered)
		}
	}
	if rep.Capacity["io"] <= 0 || rep.Rounds <= 0 {
		t.Errorf("calibration missing: capacity %v, rounds %d", rep.Capacity, rep.Rounds)
	}
	checkSVG(t, filepath.Join(dir, "io.svg"))

	mu.Lock()
	defer mu.Unlock()
	// The rounds, then 2 capacities of capacityTries measurements, the 2
	// cells and the rejection-cost cells, of 2 processes each.
	if want := 1 + 2*(2*capacityTries+2+len(rejectLabels)); len(pids) != want {
		t.Errorf("%d children started, want %d", len(pids), want)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("child %d is still there (kill 0: %v)", pid, err)
		}
	}
}

func checkSVG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkSVGString(t, string(b))
}

// checkSVGString fails t unless svg is well-formed XML that draws at least
// one series.
func checkSVGString(t *testing.T, svg string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	lines := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && (se.Name.Local == "polyline" || se.Name.Local == "circle") {
			lines++
		}
	}
	if lines == 0 {
		t.Error("the SVG plots nothing")
	}
}

// TestRunRejectsBadFlags: a bad matrix is an error before any process starts.
func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-contenders", "nobody"},
		{"-scenarios", "disk"},
		{"-multiples", "0"},
		{"-multiples", "NaN"},
		{"-warmup", "2s", "-duration", "1s"},
		{"-bucket", "2s", "-duration", "1s"},
		{"-bucket", "-1s"},
		{"-rounds", "0"},
		{"-http", "3"},
		{"-role", "client"},
	} {
		started := false
		self := selfCmd{argv: []string{"false"}, started: func(int) { started = true }}
		if err := run(args, strings.NewReader(""), io.Discard, io.Discard, self); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
		if started {
			t.Errorf("run(%q) started a process", args)
		}
	}
}

func TestQuantileIsNearestRank(t *testing.T) {
	xs := make([]int64, 100)
	for i := range xs {
		xs[i] = int64(100 - i) // 100..1, unsorted
	}
	for _, c := range []struct {
		p    float64
		want int64
	}{{0.5, 50}, {0.99, 99}, {1, 100}, {0.001, 1}} {
		if got := quantile(xs, c.p); got != c.want {
			t.Errorf("quantile(1..100, %v) = %d, want %d", c.p, got, c.want)
		}
	}
	if got := quantile(nil, 0.99); got != 0 {
		t.Errorf("quantile(empty) = %d, want 0", got)
	}
	if got := quantile([]int64{7}, 0.99); got != 7 {
		t.Errorf("quantile([7]) = %d, want 7", got)
	}
}

func TestSpreadOfIgnoresNaNAndAveragesTheMiddlePair(t *testing.T) {
	nan := func() float64 { var z float64; return z / z }()
	s := spreadOf([]float64{3, nan, 1, 2})
	if s.med != 2 || s.lo != 1 || s.hi != 3 || s.n != 3 {
		t.Errorf("spreadOf(3, NaN, 1, 2) = %+v, want median 2 of 3 in [1, 3]", s)
	}
	s = spreadOf([]float64{4, 1, 2, 3})
	if s.med != 2.5 || s.n != 4 {
		t.Errorf("spreadOf(4, 1, 2, 3) = %+v, want median 2.5", s)
	}
	if s := spreadOf([]float64{nan}); s.n != 0 || s.med == s.med {
		t.Errorf("spreadOf(NaN) = %+v, want no figure", s)
	}
}

func TestPlanPinningSplitsTheCPUs(t *testing.T) {
	for _, c := range []struct {
		procs, ncpu  int
		taskset      bool
		server, load string
		warn         bool
	}{
		{1, 2, true, "0", "1", false},
		{2, 4, true, "0-1", "2-3", false},
		{3, 4, true, "0-2", "3", false},
		{2, 2, true, "0-1", "", true},
		{1, 2, false, "", "", true},
	} {
		p, w := planPinning(c.procs, c.ncpu, c.taskset)
		if p.server != c.server || p.load != c.load || (len(w) > 0) != c.warn {
			t.Errorf("planPinning(%d, %d, %v) = %+v, %q; want server %q load %q, warning %v", c.procs, c.ncpu, c.taskset, p, w, c.server, c.load, c.warn)
		}
	}
}

func TestEndpointDoubleDoublesTheWork(t *testing.T) {
	e, err := newEndpoint(100, 20*time.Millisecond, 8)
	if err != nil {
		t.Fatal(err)
	}
	e.double()
	if e.rounds.Load() != 200 || time.Duration(e.wait.Load()) != 40*time.Millisecond {
		t.Errorf("after double: %d rounds, wait %v; want 200 and 40ms", e.rounds.Load(), time.Duration(e.wait.Load()))
	}
	if _, err := newEndpoint(-1, 0, 0); err == nil {
		t.Error("newEndpoint(-1 rounds) = nil error")
	}
}

func TestRotatedPutsEveryContenderInEveryPosition(t *testing.T) {
	names := []string{"a", "b", "c"}
	seen := map[string]map[int]bool{}
	for r := range len(names) {
		got := rotated(names, r)
		if len(got) != len(names) {
			t.Fatalf("round %d: %q", r, got)
		}
		for pos, n := range got {
			if seen[n] == nil {
				seen[n] = map[int]bool{}
			}
			seen[n][pos] = true
		}
	}
	for _, n := range names {
		if len(seen[n]) != len(names) {
			t.Errorf("%s ran in positions %v over %d rounds, want all", n, seen[n], len(names))
		}
	}
	if got := rotated(names, 4); got[0] != "b" {
		t.Errorf("rotated(round 4) = %q, want it to start at b", got)
	}
}

// readReport reads the cells.json a run wrote into dir.
func readReport(t *testing.T, dir string) report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cells.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}
