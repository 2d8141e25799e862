package main

import (
	"bytes"
	"regexp"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSelfTest plays the self-test and checks its targets and its line:
// no legitimate request rejected (the bar is under 0.1%), the botnet
// held to at most 5% of its attempts after its first minute, the scraper
// tightened and penalized, the flood filling the per-IP table without one
// newcomer answered 429, and the status page listing hot keys and
// penalized clients by hash.
func TestSelfTest(t *testing.T) {
	var out bytes.Buffer
	res, err := selfTest(&out)
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
	if res.hotKeys == 0 || res.penalized == 0 {
		t.Errorf("the status page listed %d hot keys and %d penalized clients", res.hotKeys, res.penalized)
	}
}
