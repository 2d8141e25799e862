package policy_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/policy"
)

// TestSuspicionDryRunAndDemoteFields: "dry_run" leaves a suspicious
// client its whole burst and counts what tightening would have rejected;
// "demote_to" must name a priority class.
func TestSuspicionDryRunAndDemoteFields(t *testing.T) {
	doc := `{
  "version": 1,
  "suspicion": {"capacity": 1000, "threshold": 0.25, "floor": 0.25, "dry_run": true, "demote_to": "sheddable"},
  "rules": [
    {"name": "ip", "identity": "ip", "algorithm": "token_bucket", "limit": 8, "rate": {"count": 1, "per": "1h"}}
  ]
}`
	c := controllerOf(t, doc)
	h := c.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	admitted := 0
	for range 10 { // no User-Agent: suspicious at the default weights
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		if w.Code == http.StatusOK {
			admitted++
		}
	}
	if s := c.Stats(); admitted != 8 || s.TightenedWouldReject != 6 {
		t.Fatalf("dry-run tightening: %d admitted (want 8), %d would-be rejections (want 6)", admitted, s.TightenedWouldReject)
	}
	bad := strings.Replace(doc, `"sheddable"`, `"lowest"`, 1)
	if _, err := policy.Parse("t.json", []byte(bad)); err == nil || !strings.Contains(err.Error(), "suspicion.demote_to") {
		t.Fatalf("an unknown class: %v", err)
	}
}
