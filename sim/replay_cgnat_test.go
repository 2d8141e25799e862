package sim

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/policy"
)

// TestReplayScalesIPRulesForCGNAT: as the middleware does, the replay
// gives a carrier-grade NAT address (100.64.0.0/10) its IP rules' CGNAT
// factor: five logins from one CGNAT address pass a limit of 2 per IP
// (times 10), five from another address do not.
func TestReplayScalesIPRulesForCGNAT(t *testing.T) {
	p, err := policy.Parse("cgnat.json", []byte(`{"version": 1, "rules": [
  {"name": "login-ip", "identity": "ip", "algorithm": "sliding_log", "limit": 2, "window": "1h"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var csv strings.Builder
	csv.WriteString(CSVHeader + "\n")
	for i := range 5 {
		for _, ip := range []string{"100.64.1.1", "198.51.100.1"} {
			label := "legit"
			if ip == "198.51.100.1" {
				label = "abusive"
			}
			csv.WriteString("1700000000." + string(rune('0'+i)) + "," + ip + ",,,,,POST,/login," + label + "\n")
		}
	}
	tr, err := NewCSVReader(strings.NewReader(csv.String()))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Replay(p, tr)
	if err != nil {
		t.Fatal(err)
	}
	if o := rep.Policy; o.LegitRejected != 0 || o.AbusiveRejected != 3 {
		t.Errorf("CGNAT address: %d of %d rejected (want 0); other: %d of %d (want 3)", o.LegitRejected, o.Legit, o.AbusiveRejected, o.Abusive)
	}
}
