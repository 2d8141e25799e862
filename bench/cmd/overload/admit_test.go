package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestEveryAdmitContenderAdmitsAndWritesItsHeaders: each admission-cost
// contender, built as the server builds it, answers 200 to a run of
// requests from one client address (its per-IP limit is never reached),
// and writes the rate-limit header fields it is said to write.
func TestEveryAdmitContenderAdmitsAndWritesItsHeaders(t *testing.T) {
	want := map[string][]string{
		"none":             nil,
		sluiceIPName:       {"Ratelimit", "Ratelimit-Policy", "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"},
		sluiceIPLegacyName: {"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"},
		sluiceIPBareName:   nil,
		"httprate":         {"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"},
		"go-limiter":       {"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"},
		"throttled":        {"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"},
	}
	if len(want) != len(admitContenders) {
		t.Fatalf("the test knows %d contenders, the set has %d", len(want), len(admitContenders))
	}
	for _, name := range admitContenders {
		t.Run(name, func(t *testing.T) {
			fields, ok := want[name]
			if !ok {
				t.Fatalf("no expectation for %s", name)
			}
			p, err := newProtection(name, protectionConfig{static: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer p.close()
			ep, err := newEndpoint(0, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			h := p.wrap(ep)
			for i := range 100 {
				rec := httptest.NewRecorder()
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.RemoteAddr = "127.0.0.1:40000"
				h.ServeHTTP(rec, r)
				if rec.Code != http.StatusOK {
					t.Fatalf("request %d answered %d, want 200", i, rec.Code)
				}
				var got []string
				for k := range rec.Header() {
					if strings.HasPrefix(k, "Ratelimit") || strings.HasPrefix(k, "X-Ratelimit") {
						got = append(got, k)
					}
				}
				if len(got) != len(fields) {
					t.Fatalf("rate-limit fields %q, want %q", got, fields)
				}
				for _, f := range fields {
					if rec.Header().Get(f) == "" {
						t.Fatalf("no %s (fields %q)", f, got)
					}
				}
			}
		})
	}
}

// TestRunAdmitSetServesEveryContenderOverLoopback runs the admission-cost
// set alone with short cells: every contender in its own server process
// answers every request 200 at the fixed rate, and the table has a row per
// contender.
func TestRunAdmitSetServesEveryContenderOverLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and runs for a few seconds")
	}
	dir := t.TempDir()
	self := selfCmd{argv: []string{os.Args[0]}, env: []string{childEnv}}
	var out, log bytes.Buffer
	args := []string{"-scenarios", admitScenario, "-reject=false", "-rounds", "1", "-duration", "300ms", "-warmup", "0s", "-admit-rate", "200", "-out", dir}
	if err := run(args, strings.NewReader(""), &out, &log, self); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	table := out.String()
	for _, name := range admitContenders {
		if !strings.Contains(table, "| "+admitLabel(name)+" |") {
			t.Errorf("the table lacks the row of %s:\n%s", name, table)
		}
	}
	if !strings.Contains(table, "#### cost of an admission: an empty 200 at 200 req/s") {
		t.Errorf("the table lacks its heading:\n%s", table)
	}
	rep := readReport(t, dir)
	if len(rep.Cells) != len(admitContenders) {
		t.Fatalf("%d cells, want one per contender (%d)", len(rep.Cells), len(admitContenders))
	}
	for _, c := range rep.Cells {
		if c.Scenario != admitScenario || c.Err != "" || c.Load.Good == 0 || c.Load.Shed+c.Load.Errors+c.Load.Timeouts != 0 || c.Server.UserUS+c.Server.SysUS <= 0 {
			t.Errorf("cell %s: %+v, want every request answered 200 and server CPU measured\n%s", c.Contender, c, log.String())
		}
		if c.Load.WindowS != 0.2 {
			t.Errorf("cell %s counted answers over %v s, want the last two thirds of its 0.3 s", c.Contender, c.Load.WindowS)
		}
		if c.Rate != 200 {
			t.Errorf("cell %s ran at %v req/s, want 200", c.Contender, c.Rate)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, admitScenario+".svg")); err == nil {
		t.Error("the admission set wrote an SVG; its figures are in its table")
	}
}

// admitCell is one admission-cost cell of round whose server spent cpuUS
// on answers 200s.
func admitCell(contender string, round int, answers, cpuUS int64) cell {
	return cell{
		Scenario: admitScenario, Contender: contender, Round: round, Rate: 1000,
		Load:   loadResult{Sent: answers, Good: answers, WindowS: 2, Dials: 3},
		Server: serverStats{UserUS: cpuUS * 3 / 4, SysUS: cpuUS - cpuUS*3/4, Requests: answers, Conns: 3},
	}
}

// TestAdmitTableGivesOverheadsOverTheFloorOfTheSameRound: a contender's
// overhead is its CPU per request less the floor's of the same round, the
// median with the min-max over rounds, and a peer's ratio is its median
// overhead over sluice's; a round whose floor failed has no overhead.
func TestAdmitTableGivesOverheadsOverTheFloorOfTheSameRound(t *testing.T) {
	failed := admitCell("none", 3, 1000, 1)
	failed.Err = "overload: no \"ready \""
	rep := &report{
		Config: map[string]string{"admit-rate": "1000"},
		Cells: []cell{
			// µs per request: floor 100, 110, 120; sluice 130, 150, 140
			// (overheads 30, 40, 20); httprate 160, 170, 200 (60, 60, 80).
			admitCell("none", 0, 1000, 100_000), admitCell("none", 1, 1000, 110_000), admitCell("none", 2, 1000, 120_000),
			admitCell(sluiceIPName, 0, 1000, 130_000), admitCell(sluiceIPName, 1, 1000, 150_000), admitCell(sluiceIPName, 2, 1000, 140_000),
			admitCell("httprate", 0, 1000, 160_000), admitCell("httprate", 1, 1000, 170_000), admitCell("httprate", 2, 1000, 200_000),
			failed, admitCell("httprate", 3, 1000, 500_000), // no floor in round 3: no overhead
		},
	}
	var out bytes.Buffer
	writeAdmitTable(&out, rep)
	table := out.String()
	for _, want := range []string{
		"| " + admitLabel("none") + " | 500 | 0 | 110.0 (100.0-120.0) | - | - |",
		"| " + admitLabel(sluiceIPName) + " | 500 | 0 | 140.0 (130.0-150.0) | 30.0 (20.0-40.0) | 1.00 |",
		"| " + admitLabel("httprate") + " | 500 | 0 | 185.0 (160.0-500.0) | 60.0 (60.0-80.0) | 2.00 |",
		"| " + admitLabel("throttled") + " | - | - | - | - | - |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
}

// lockedBuffer is a bytes.Buffer that the phase's timer goroutines may
// write while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPhaseCountsOnlyWhatFollowsItsFrom: a phase measured from 400 ms on
// counts the requests and connections of that part alone, so that what the
// start of a cell costs (its dials) stays out of the admission cost.
func TestPhaseCountsOnlyWhatFollowsItsFrom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var inflight, requests, conns atomic.Int64
		ep, err := newEndpoint(0, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out lockedBuffer
		after := func(d time.Duration) { <-time.NewTimer(d).C }
		requests.Add(7) // before the phase
		phase(serverConfig{sample: 50 * time.Millisecond}, time.Second, 400*time.Millisecond, ep, &protection{}, &inflight, &requests, &conns, &out)
		after(300 * time.Millisecond)
		requests.Add(5) // before from
		conns.Add(2)
		after(300 * time.Millisecond)
		requests.Add(11)
		conns.Add(3)
		after(500 * time.Millisecond)
		synctest.Wait()
		line, ok := strings.CutPrefix(strings.TrimSpace(out.String()), "stats ")
		if !ok {
			t.Fatalf("no stats line: %q", out.String())
		}
		var st serverStats
		if err := json.Unmarshal([]byte(line), &st); err != nil {
			t.Fatal(err)
		}
		if st.Requests != 11 || st.Conns != 3 {
			t.Errorf("%d requests and %d connections counted, want the 11 and 3 after from", st.Requests, st.Conns)
		}
	})
}
