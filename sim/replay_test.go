package sim

import (
	"bufio"
	"bytes"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/policy"
)

// poissonPMF returns P(X = k) for X ~ Poisson(lambda).
func poissonPMF(lambda float64, k int) float64 {
	lg, _ := math.Lgamma(float64(k + 1))
	return math.Exp(float64(k)*math.Log(lambda) - lambda - lg)
}

// peakQuantile is the smallest k with P(max of w independent
// Poisson(lambda) windows <= k) >= q.
func peakQuantile(lambda float64, w int, q float64) int64 {
	cdf := 0.0
	for k := 0; ; k++ {
		cdf += poissonPMF(lambda, k)
		if math.Pow(cdf, float64(w)) >= q {
			return int64(k)
		}
	}
}

// Replay of a synthetic trace whose answer is known: users are Poisson at
// 20 a minute (no daily cycle), so a user's requests in an aligned minute
// are Poisson(20), the peak over the trace's 10 minutes has the CDF F^10,
// and a fixed window of 25 a minute rejects E[(X-25)+]/20 of the requests.
func TestReplayKnownAnswer(t *testing.T) {
	const users, rate, minutes, limit = 1000, 20.0, 10, 25
	spec := TraceSpec{Seed: 7, Start: time.Unix(1_700_000_040, 0).Truncate(time.Minute), Duration: minutes * time.Minute,
		Users: users, UserRate: rate}
	gen, err := NewGenerator(spec)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse("known.json", []byte(`{"version": 1, "rules": [
  {"name": "per-user", "category": "read", "identity": "user", "algorithm": "fixed_window", "limit": 25, "window": "1m"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Replay(p, gen)
	if err != nil {
		t.Fatal(err)
	}
	want := users * rate * minutes
	if math.Abs(float64(rep.Records)-want) > 4*math.Sqrt(want) {
		t.Fatalf("%d records, want %v ± 4σ", rep.Records, want)
	}
	r := rep.Rules[0]
	// The p99 of per-user peaks lies between the analytic 97% and 99.9%
	// quantiles (1000 users: the empirical p99 is the 990th of 1000).
	lo, hi := peakQuantile(rate, minutes, 0.97), peakQuantile(rate, minutes, 0.999)
	if r.P99 < lo || r.P99 > hi || r.LegitKeys != users {
		t.Fatalf("p99 of peaks %d, want in [%d, %d] (analytic p99 %d); %d keys", r.P99, lo, hi,
			peakQuantile(rate, minutes, 0.99), r.LegitKeys)
	}
	if r.Recommended < int64(2.5*float64(r.P99)) || r.Recommended > 3*r.P99 || r.Recommended != RoundUpNice(2.5*float64(r.P99)) {
		t.Fatalf("recommended %d for p99 %d", r.Recommended, r.P99)
	}
	// False positives: E[(X-L)+]/lambda, within 15% (about 3σ here).
	excess := 0.0
	for k := limit + 1; k < 200; k++ {
		excess += float64(k-limit) * poissonPMF(rate, k)
	}
	fp := excess / rate
	if math.Abs(r.FalsePositiveRate-fp) > 0.15*fp {
		t.Fatalf("false-positive rate %.5f, analytic %.5f", r.FalsePositiveRate, fp)
	}
	if rep.Policy.FalsePositiveRate != r.FalsePositiveRate {
		t.Fatalf("one rule: policy %v, rule %v", rep.Policy.FalsePositiveRate, r.FalsePositiveRate)
	}
	t.Logf("p99 %d (analytic %d), recommended %d, false positives %.4f%% (analytic %.4f%%)",
		r.P99, peakQuantile(rate, minutes, 0.99), r.Recommended, 100*r.FalsePositiveRate, 100*fp)
}

// The abuse populations are caught by the rules meant for them: the
// botnet by the per-account login limit, the scraper by the per-IP limit,
// and the legitimate users behind the scraper's CGNAT address pay for it
// in false positives, which the report shows (with the per-IP rule's
// CGNAT scaling turned off: at its default tenfold the scraper would pass).
func TestReplayAbuse(t *testing.T) {
	spec := TraceSpec{Seed: 3, Start: time.Unix(1_700_000_000, 0), Duration: time.Hour,
		Users: 200, UserRate: 1, LoginShare: 0.01, CGNATUsers: 5,
		Automation: 2, AutomationRate: 120, BotnetIPs: 500, BotnetRate: 200, BotnetPerIP: 3, ScraperRate: 300}
	gen, err := NewGenerator(spec)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse("abuse.json", []byte(`{"version": 1,
 "categories": [{"name": "auth", "routes": ["POST /login"]}],
 "rules": [
  {"name": "login-account", "category": "auth", "identity": "user", "algorithm": "sliding_log", "limit": 5, "window": "15m"},
  {"name": "reads-ip", "category": "read", "identity": "ip", "algorithm": "sliding_window", "limit": 60, "window": "1m", "cgnat_factor": 1}],
 "penalties": {"identity": "ip", "capacity": 10000, "strikes": 3, "window": "1h", "timeouts": ["10m"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Replay(p, gen)
	if err != nil {
		t.Fatal(err)
	}
	login, reads := rep.Rules[0], rep.Rules[1]
	if login.CatchRate < 0.5 || login.FalsePositiveRate > 0.01 {
		t.Errorf("login: catch %.3f, false positives %.4f", login.CatchRate, login.FalsePositiveRate)
	}
	if reads.CatchRate < 0.5 || reads.FalsePositiveRate == 0 {
		t.Errorf("reads: catch %.3f, false positives %.4f (CGNAT users must show)", reads.CatchRate, reads.FalsePositiveRate)
	}
	if rep.EarlyWarnings == 0 {
		t.Error("the scraper (5 a second against 60 a minute) raised no early warning")
	}
	if len(rep.Penalized) == 0 || rep.Penalized[0].Key != "ip:100.64.0.1" {
		t.Errorf("penalized %+v, want the scraper's address first", rep.Penalized)
	}
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"login-account", "reads-ip", "ip:100.64.0.1", "recommended"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}
}

// A generated trace written as CSV reads back identical, and the same
// seed gives the same trace.
func TestTraceCSVRoundTrip(t *testing.T) {
	spec := TraceSpec{Seed: 1, Start: time.Unix(1_700_000_000, 0), Duration: 10 * time.Minute,
		Users: 20, UserRate: 2, Diurnal: 0.5, WriteShare: 0.1, LoginShare: 0.05, CGNATUsers: 2,
		Automation: 1, AutomationRate: 10, BotnetIPs: 10, BotnetRate: 5, BotnetPerIP: 2, ScraperRate: 20}
	collect := func(r TraceReader) []Record {
		var out []Record
		var rec Record
		for {
			err := r.Next(&rec)
			if err == io.EOF {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, rec)
		}
	}
	g1, _ := NewGenerator(spec)
	g2, _ := NewGenerator(spec)
	a, b := collect(g1), collect(g2)
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("%d and %d records", len(a), len(b))
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	w.WriteString(CSVHeader + "\n")
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("record %d differs between runs of one seed", i)
		}
		if err := WriteCSVRecord(w, &a[i]); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	cr, err := NewCSVReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	back := collect(cr)
	if len(back) != len(a) {
		t.Fatalf("read back %d of %d records", len(back), len(a))
	}
	for i := range a {
		if d := back[i].Time - a[i].Time; d < -1e6 || d > 1e6 { // CSV keeps milliseconds
			t.Fatalf("record %d time %d, want %d", i, back[i].Time, a[i].Time)
		}
		back[i].Time = a[i].Time
		if back[i] != a[i] {
			t.Fatalf("record %d: %+v, want %+v", i, back[i], a[i])
		}
	}
}

func TestTraceReaders(t *testing.T) {
	js := `{"timestamp": "2026-11-30T12:00:00Z", "ip": "192.0.2.1", "user": "u", "method": "GET", "route": "/a", "label": "legit"}
{"timestamp": 1764504001.5, "ip": "192.0.2.2", "method": "POST", "route": "/login", "label": "abusive"}
`
	var rec Record
	r := NewJSONReader(strings.NewReader(js))
	if err := r.Next(&rec); err != nil || rec.User != "u" || rec.Label != Legit || rec.Time != time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixNano() {
		t.Fatalf("%+v %v", rec, err)
	}
	if err := r.Next(&rec); err != nil || rec.Label != Abusive || rec.Time != 1764504001_500_000_000 {
		t.Fatalf("%+v %v", rec, err)
	}
	if err := r.Next(&rec); err != io.EOF {
		t.Fatal(err)
	}
	log := `198.51.100.7 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif?x=1 HTTP/1.0" 200 2326 "http://example.com/" "Mozilla/4.08"
198.51.100.8 - - [10/Oct/2000:13:55:37 -0700] "POST /login HTTP/1.1" 401 0
`
	a := NewAccessLogReader(strings.NewReader(log))
	if err := a.Next(&rec); err != nil || rec.User != "frank" || rec.Route != "/apache_pb.gif" || rec.IP.String() != "198.51.100.7" {
		t.Fatalf("%+v %v", rec, err)
	}
	if err := a.Next(&rec); err != nil || rec.User != "" || rec.Method != "POST" {
		t.Fatalf("%+v %v", rec, err)
	}
	bad := NewAccessLogReader(strings.NewReader("garbage line\n"))
	if err := bad.Next(&rec); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("got %v", err)
	}
	if _, err := NewCSVReader(strings.NewReader("ip,user\n")); err == nil {
		t.Fatal("a header without timestamp was accepted")
	}
}

func TestRoundUpNice(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want int64
	}{{0.5, 1}, {1, 1}, {2.5, 3}, {12.5, 14}, {40, 40}, {41, 45}, {62.5, 70}, {2500, 2500}, {2501, 3000}, {95, 100}, {15.5, 16}} {
		if got := RoundUpNice(tc.v); got != tc.want {
			t.Errorf("RoundUpNice(%v) = %d, want %d", tc.v, got, tc.want)
		}
	}
	for p99 := 1.0; p99 < 1e7; p99 = math.Ceil(p99 * 1.03) {
		if got := float64(RoundUpNice(2.5 * p99)); got < 2.5*p99 || got > 3*p99 {
			t.Fatalf("RoundUpNice(2.5*%v) = %v, outside [2.5, 3]x", p99, got)
		}
	}
}

// records is a TraceReader over a slice.
type records []Record

func (r *records) Next(rec *Record) error {
	if len(*r) == 0 {
		return io.EOF
	}
	*rec, *r = (*r)[0], (*r)[1:]
	return nil
}

// Overrides are in force by trace time: until their Until, not until a
// time of the machine that replays.
func TestReplayOverridesOnTraceTime(t *testing.T) {
	start := time.Date(2020, 1, 6, 0, 0, 0, 0, time.UTC)
	p, err := policy.Parse("ov.json", []byte(`{"version": 1,
 "rules": [{"name": "hourly", "identity": "user", "algorithm": "fixed_window", "limit": 5, "window": "1h"}],
 "overrides": [{"rule": "hourly", "key": "big", "factor": 2, "until": "2020-01-06T00:30:00Z"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var tr records
	for _, at := range []time.Duration{time.Minute, 40 * time.Minute} {
		for i := range 10 {
			tr = append(tr, Record{Time: start.Add(at + time.Duration(i)*time.Second).UnixNano(), User: "big",
				Method: "GET", Route: "/", Label: Legit})
		}
	}
	rep, err := Replay(p, &tr)
	if err != nil {
		t.Fatal(err)
	}
	// Minute 1: 10 of 10 under the override (limit 10). Minute 40: the
	// override has ended, the rule's own state is fresh: 5 of 10.
	if rep.Policy.WouldReject != 5 {
		t.Fatalf("policy rejected %d, want 5", rep.Policy.WouldReject)
	}
	// The rule alone, without overrides: 5 of the first 10, none of the
	// second 10 (the same hour).
	if rep.Rules[0].WouldReject != 15 {
		t.Fatalf("rule alone rejected %d, want 15", rep.Rules[0].WouldReject)
	}
	if _, err := Replay(p, new(records)); err == nil {
		t.Fatal("an empty trace replayed")
	}
}
