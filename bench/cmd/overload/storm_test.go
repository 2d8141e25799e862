package main

import (
	"bytes"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// stormCell builds a storm cell at a capacity of 100 req/s whose goodput
// is 0.8 of it before the stall, nothing from the stall on for down
// buckets, then 0.8 again; dials 5 a bucket from the stall on.
func stormCell(down int) cell {
	n := int((stormBefore + stormStall + stormAfter) / recoveryBucket)
	stall := int(stormBefore / recoveryBucket)
	bs := make([]bucket, n)
	for i := range bs {
		bs[i] = bucket{Due: 100, Good: 8}
		if i >= stall {
			bs[i].Dials = 5
			if i-stall < down {
				bs[i].Good = 0
			}
		}
	}
	return cell{Scenario: "storm", Contender: "sluice-early", Multiple: 10,
		Load: loadResult{Buckets: bs, MaxLagUS: 7_000, CPUUS: int64(n) * 50_000}}
}

func TestStormOfTimesTheRecoveryFromTheStallsEnd(t *testing.T) {
	stall := int(stormStall / recoveryBucket)
	f := stormOf(stormCell(stall+6), 100)
	if f.before != 0.8 || f.last != 0.8 {
		t.Errorf("goodput before %v, in the last second %v: want 0.8 and 0.8", f.before, f.last)
	}
	if f.backMS != 600 {
		t.Errorf("back %v ms after the stall's end, want 600", f.backMS)
	}
	n := int((stormStall + stormAfter) / recoveryBucket)
	if f.dials != int64(5*n) || f.lagMS != 7 || math.Abs(f.genCore-0.5) > 1e-9 {
		t.Errorf("dials %d lag %v ms core %v, want %d, 7 and 0.5", f.dials, f.lagMS, f.genCore, 5*n)
	}
	// Back within the stall (the requests owed were answered in time):
	// zero, not a negative time.
	if f := stormOf(stormCell(1), 100); f.backMS != 0 {
		t.Errorf("back %v ms after a dip shorter than the stall, want 0", f.backMS)
	}
	if f := stormOf(stormCell(1000), 100); !math.IsNaN(f.backMS) || f.last != 0 {
		t.Errorf("never back: got %v ms, last second %v", f.backMS, f.last)
	}
	failed := stormCell(0)
	failed.Err = "overload: boom"
	if f := stormOf(failed, 100); !math.IsNaN(f.before) {
		t.Errorf("a failed cell has a goodput of %v", f.before)
	}
}

func TestStormTableSaysNever(t *testing.T) {
	sc := scenario{name: "storm", storm: true, multiples: []float64{10}, capacity: 100}
	rep := &report{Config: map[string]string{}, contenders: []string{"sluice-early", "static"}, scenarios: []scenario{sc}}
	stall := int(stormStall / recoveryBucket)
	for r := range 3 {
		c := stormCell(stall + 4 + r)
		c.Round = r
		s := stormCell(1000)
		s.Contender, s.Round = "static", r
		rep.Cells = append(rep.Cells, c, s)
	}
	checkTableHas(t, rep, "| sluice-early | 10x | 0.80 | 500 (400-600) | 0.80 |", "| static | 10x | 0.80 | never (3 of 3) | 0.00 |", "the generator stalls for 300ms after 1.5s")
}

func TestStormIOIsTheIOEndpoint(t *testing.T) {
	scs, err := runConfig{scenarios: []string{"storm-io"}, service: 20 * time.Millisecond, slots: 8, procs: 1}.buildScenarios(1000)
	if err != nil {
		t.Fatal(err)
	}
	sc := scs[0]
	if !sc.storm || sc.slots != 8 || sc.wait != 20*time.Millisecond || sc.rounds != 0 || sc.multiples[0] != 10 {
		t.Fatalf("storm-io %+v, want the I/O endpoint at 10x", sc)
	}
	if d := describe(sc, nil, 1000); !strings.HasPrefix(d, "storm: I/O 8 slots x 20ms;") {
		t.Errorf("described as %q", d)
	}
}

// TestStallSendsNothingThenWhatFellDue drives a loopback server with a
// stall mid-cell: no request completes during it (none was sent), the
// arrivals still fall due, every one of them is sent, and they go out
// together once it ends.
func TestStallSendsNothingThenWhatFellDue(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	res, err := drive(loadConfig{
		url: srv.URL, rate: 400, duration: 900 * time.Millisecond, deadline: 5 * time.Second, proto: "1", client: "raw",
		seed: 3, bucket: 100 * time.Millisecond, stall: 300 * time.Millisecond, stallAt: 300 * time.Millisecond,
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var due, owed, after int64
	for i, b := range res.Buckets {
		due += b.Due
		if i >= 3 && i < 6 {
			owed += b.Due
		}
		if i >= 6 {
			after += b.Good
		}
	}
	checkSentNothingDuring(t, res.Buckets, 100*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond)
	if res.Sent != due || owed == 0 {
		t.Errorf("sent %d of %d due (%d during the stall)", res.Sent, due, owed)
	}
	if after < owed {
		t.Errorf("%d answers from the stall's end on, want at least the %d owed", after, owed)
	}
	if res.MaxLagUS > 200_000 {
		t.Errorf("worst lag %d µs: the stall's own lateness counted", res.MaxLagUS)
	}
	if res.CPUUS <= 0 {
		t.Errorf("generator CPU %d µs", res.CPUUS)
	}
	if _, err := drive(loadConfig{url: srv.URL, rate: 400, duration: time.Second, deadline: time.Second, stall: time.Second, stallAt: 100 * time.Millisecond}, io.Discard); err == nil {
		t.Error("a stall past the cell's end was taken")
	}
}

// TestRunStormStallsTheGeneratorMidCell runs the storm scenario at 1x:
// its cell lasts the three phases, the generator sends nothing during the
// stall, and the table reads its figures.
func TestRunStormStallsTheGeneratorMidCell(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and runs for a few seconds")
	}
	self := selfCmd{argv: []string{os.Args[0]}, env: []string{childEnv}}
	var out, log bytes.Buffer
	dir := t.TempDir()
	args := []string{"-scenarios", "storm", "-contenders", "none", "-multiples", "1", "-rounds", "1", "-reject=false", "-calibrate", "300ms", "-out", dir}
	if err := run(args, strings.NewReader(""), &out, &log, self); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	if !strings.Contains(out.String(), "#### storm:") || !strings.Contains(out.String(), "| none | 1x |") {
		t.Errorf("no storm table:\n%s", out.String())
	}
	rep := readReport(t, dir)
	if len(rep.Cells) != 1 || rep.Cells[0].Err != "" {
		t.Fatalf("cells %+v, want one that ran", rep.Cells)
	}
	bs := rep.Cells[0].Load.Buckets
	if want := int((stormBefore + stormStall + stormAfter) / recoveryBucket); len(bs) != want {
		t.Fatalf("%d buckets, want %d", len(bs), want)
	}
	checkSentNothingDuring(t, bs, recoveryBucket, stormBefore, stormStall)
}

// checkSentNothingDuring checks buckets bs of length bucket for a stall
// of length stall from at: arrivals fall due in each of its buckets, and
// every good answer that completed in one after its first was sent
// before the stall (its latency, from its arrival, reaches back past the
// stall's start: a slow server may still answer those).
func checkSentNothingDuring(t *testing.T, bs []bucket, bucket, at, stall time.Duration) {
	t.Helper()
	first, end := int(at/bucket), int((at+stall)/bucket)
	for i := first; i < end && i < len(bs); i++ {
		b := bs[i]
		if b.Due == 0 {
			t.Errorf("bucket %d, in the stall: no arrival due", i)
		}
		if i == first {
			continue
		}
		back := time.Duration(i)*bucket - at
		for _, lat := range b.LatsUS {
			if time.Duration(lat)*time.Microsecond < back {
				t.Errorf("bucket %d, in the stall, holds an answer of %d µs: sent %v or less before it began, during the stall", i, lat, back)
			}
		}
	}
}
