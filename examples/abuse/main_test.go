package main

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/sim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSelfTest plays the self-test and checks its targets and its line:
// no legitimate request rejected (the bar is under 0.1%), the botnet
// held to at most 5% of its attempts after its first minute, the scraper
// tightened and penalized, the flood filling the per-IP table without one
// newcomer rejected, and the status page listing hot keys and
// penalized clients by hash. The play, written as a trace and replayed
// through the same policy by sim (which sees no User-Agent and no JA4, so
// tightens no one), rejects the legitimate requests the live run did,
// the newcomers' 503s included: the false-positive rate measured on a
// trace.
func TestSelfTest(t *testing.T) {
	var out, trace bytes.Buffer
	res, err := selfTest(&out, &trace)
	t.Logf("%s%+v", out.Bytes(), res)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^abuse: legit_requests=\d+ legit_rejected=\d+ botnet_requests=\d+ botnet_admitted=\d+ scraper_admitted=\d+ flood_newcomer_rejected=\d+ tightened=\d+\n$`)
	if !line.Match(out.Bytes()) {
		t.Errorf("the self-test printed %q, not its one line", out.Bytes())
	}
	if res.legitRequests < 2000 {
		t.Errorf("%d legitimate requests: too few for a false-positive rate under 0.1%% to mean anything", res.legitRequests)
	}
	if res.scraperAdmitted*4 > 360-10 {
		t.Errorf("the scraper got %d answers of its 350 requests: not tightened", res.scraperAdmitted)
	}
	if res.tightened == 0 || res.newcomerRequests == 0 || res.overflowed == 0 {
		t.Errorf("tightened %d, newcomer requests %d, overflowed %d: a part of the play did not happen", res.tightened, res.newcomerRequests, res.overflowed)
	}
	if res.early == 0 {
		t.Error("no early warning: the scraper, tightened to 30 requests per 5 minutes, passes half of them within a minute")
	}
	if res.hotKeys == 0 || res.penalized == 0 {
		t.Errorf("the status page listed %d hot keys and %d penalized clients", res.hotKeys, res.penalized)
	}

	pol, err := policy.Parse("policy.json", policyFile)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := sim.NewCSVReader(&trace)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sim.Replay(pol, tr)
	if err != nil {
		t.Fatal(err)
	}
	o := rep.Policy
	t.Logf("replayed: %d legitimate requests, %d rejected (%.3f%%); %d abusive, %d caught",
		o.Legit, o.LegitRejected, 100*o.FalsePositiveRate, o.Abusive, o.AbusiveRejected)
	if want := res.legitRequests + res.newcomerRequests; o.Legit != int64(want) {
		t.Errorf("the trace holds %d legitimate requests, the play sent %d", o.Legit, want)
	}
	if want := res.legitRejected + res.newcomerShed + res.newcomerOverLimit; o.LegitRejected != int64(want) {
		t.Errorf("the replay rejected %d legitimate requests, the live run %d", o.LegitRejected, want)
	}
}

// TestDryRunRejectsNothing: with -dry-run the same abuse gets through and
// is counted instead: twelve guesses at one account from one address all
// reach the password check, and Stats counts the would-be rejections.
func TestDryRunRejectsNothing(t *testing.T) {
	for _, dry := range []bool{false, true} {
		svc, err := newService(config{dryRun: dry, log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := serveTLS(svc)
		if err != nil {
			t.Fatal(err)
		}
		reached := 0
		for range 12 {
			status, err := srv.send(visit{client: srv.bot, ip: "192.0.2.1", agent: "guesser", path: "/login",
				form: url.Values{"user": {"user-1"}, "password": {"guess"}}})
			if err != nil {
				t.Fatal(err)
			}
			if status == http.StatusUnauthorized {
				reached++
			}
		}
		st := svc.sluice.Stats()
		srv.close()
		switch {
		case dry && (reached != 12 || st.DryRun == 0):
			t.Errorf("dry-run: %d of 12 guesses reached the check, %d would-be rejections counted", reached, st.DryRun)
		case !dry && reached != loginPerUserLimit(t):
			t.Errorf("enforcing: %d of 12 guesses reached the check, want the account's limit", reached)
		}
	}
}

// loginPerUserLimit is the policy's login-user limit.
func loginPerUserLimit(t *testing.T) int {
	t.Helper()
	pol, err := policy.Parse("policy.json", policyFile)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := pol.Rules()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if r.Name == "login-user" {
			return int(r.Limit)
		}
	}
	t.Fatal("no login-user rule")
	return 0
}

// TestServesItsOperatorEndpoints: over TLS, the status page, its report
// (with hot keys by hash) and the Prometheus metrics answer, and the
// connection's JA4 reaches the reputation that the login feeds.
func TestServesItsOperatorEndpoints(t *testing.T) {
	svc, err := newService(config{log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := serveTLS(svc)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close()
	for range badJA4Logins {
		if _, err := srv.send(visit{client: srv.bot, ip: "192.0.2.7", agent: "a", path: "/login",
			form: url.Values{"user": {"leaked-1"}, "password": {"x"}}}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(path string) string {
		t.Helper()
		resp, err := srv.browser.Get(srv.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		return string(b)
	}
	if m := get("/metrics"); !strings.Contains(m, "sluice_") {
		t.Error("/metrics exports no sluice metric")
	}
	if p := get("/debug/sluice/"); !strings.Contains(p, `data-rule="login-user"`) || !strings.Contains(p, `class="hot-key"`) {
		t.Error("the status page lacks the rules or the hot keys")
	}
	if j := get("/debug/sluice/json"); !strings.Contains(j, `"hot_keys":[{`) || strings.Contains(j, "192.0.2.7") || strings.Contains(j, "leaked-1") {
		t.Error("the report lacks hot keys, or shows a client's identity")
	}
	svc.rep.mu.Lock()
	n := len(svc.rep.byJA4)
	svc.rep.mu.Unlock()
	if n != 1 {
		t.Errorf("the reputation holds %d JA4s after one client's logins, want 1", n)
	}
}
