package statuspage_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/statuspage"
)

// TestActionsNeedAuthorizationAndJSON: an operator resets a tenant's usage
// through the page only when authorized and only with a JSON body (no
// cross-site form can send one); without WithActions the page is
// read-only.
func TestActionsNeedAuthorizationAndJSON(t *testing.T) {
	c, err := shed.New([]shed.Rule{{Name: "daily", Identity: shed.Tenant, Algorithm: shed.FixedWindow, Limit: 1, Window: 24 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	decide := func() bool {
		d, tok, err := c.Decide(context.Background(), shed.Attempt{Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		tok.Done(shed.Success)
		return d.Allowed
	}
	decide()
	readOnly, err := statuspage.New(c)
	if err != nil {
		t.Fatal(err)
	}
	page, err := statuspage.New(c, statuspage.WithActions(func(r *http.Request) bool { return r.Header.Get("X-Operator") == "yes" }))
	if err != nil {
		t.Fatal(err)
	}
	post := func(h http.Handler, path, ctype, body string, operator bool) int {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		r.Header.Set("Content-Type", ctype)
		if operator {
			r.Header.Set("X-Operator", "yes")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if strings.Contains(w.Body.String(), "acme") {
			t.Fatalf("an answer repeats the key: %s", w.Body)
		}
		return w.Code
	}
	body := `{"rule": "daily", "key": "acme"}`
	for _, tc := range []struct {
		h        http.Handler
		ctype    string
		operator bool
		want     int
	}{
		{readOnly, "application/json", true, http.StatusMethodNotAllowed},
		{page, "application/x-www-form-urlencoded", true, http.StatusUnsupportedMediaType},
		{page, "application/json", false, http.StatusForbidden},
	} {
		if code := post(tc.h, "/reset", tc.ctype, body, tc.operator); code != tc.want {
			t.Fatalf("reset (%s, operator %v): %d, want %d", tc.ctype, tc.operator, code, tc.want)
		}
		if decide() {
			t.Fatal("the tenant's usage was reset by a refused action")
		}
	}
	if code := post(page, "/reset", "application/json", body, true); code != http.StatusOK {
		t.Fatalf("an authorized reset: %d", code)
	}
	if !decide() {
		t.Fatal("after the reset: still over the limit")
	}
	if code := post(page, "/reset", "application/json", `{"rule": "nope", "key": "acme"}`, true); code != http.StatusUnprocessableEntity {
		t.Fatalf("a reset of an unknown rule: %d", code)
	}
	if code := post(page, "/pardon", "application/json", `{"key": "acme"}`, true); code != http.StatusUnprocessableEntity {
		t.Fatalf("a pardon without penalties: %d, want 422", code)
	}
}
