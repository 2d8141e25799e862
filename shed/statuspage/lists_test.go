package statuspage_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/penalty"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/statuspage"
	"github.com/sluicehq/sluice/store"
)

// TestPageListsHotKeysAndPenalizedClientsByHash: the page and its report
// list the hottest keys of each per-key rule and the clients in a
// timeout, by hashed key only; with WithActions each row has its button,
// and the reset and pardon actions take the row's hash.
func TestPageListsHotKeysAndPenalizedClientsByHash(t *testing.T) {
	clk := newFakeClock()
	box, err := penalty.NewBox(64, penalty.WithStrikes(1, time.Hour), penalty.WithTimeouts(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	c, err := shed.New([]shed.Rule{{Name: "per-ip", Identity: shed.IP, Algorithm: shed.FixedWindow, Limit: 3, Window: time.Hour}},
		shed.WithClock(clk.now), shed.WithPenalties(box, shed.IP))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	decide := func(ip string) shed.Decision {
		d, tok, err := c.Decide(context.Background(), shed.Attempt{IP: netip.MustParseAddr(ip)})
		if err != nil {
			t.Fatal(err)
		}
		tok.Done(shed.Success)
		return d
	}
	const quiet, loud = "192.0.2.10", "192.0.2.66"
	decide(quiet)
	for range 4 { // the 4th is over: a strike, a timeout
		decide(loud)
	}
	page, err := statuspage.New(c, statuspage.WithClock(clk.now), statuspage.WithTopKeys(5),
		statuspage.WithActions(func(*http.Request) bool { return true }))
	if err != nil {
		t.Fatal(err)
	}
	_, body := serve(t, page, http.MethodGet, "/json")
	var rep statuspage.Report
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.HotKeys) != 2 || rep.HotKeys[0].Used != 3 || rep.HotKeys[0].Remaining != 0 || rep.HotKeys[1].Used != 1 || rep.HotKeys[0].Rule != "per-ip" {
		t.Fatalf("hot keys %+v, want the loud client's 3 then the quiet one's 1", rep.HotKeys)
	}
	if len(rep.Penalized) != 1 || rep.Penalized[0].LeftSeconds != 60 || rep.Penalized[0].Level != 1 || !rep.Actions {
		t.Fatalf("penalized %+v (actions %v), want one client with 60 s left", rep.Penalized, rep.Actions)
	}
	_, html := serve(t, page, http.MethodGet, "/")
	for _, b := range []string{body, html} {
		if strings.Contains(b, "192.0.2") {
			t.Fatal("the page shows a client's address")
		}
	}
	for _, want := range []string{
		`<tr class="hot-key" data-rule="per-ip" data-key="` + rep.HotKeys[0].Key + `">`,
		`data-action="reset" data-rule="per-ip" data-hash="` + rep.HotKeys[0].Key + `"`,
		`<tr class="penalized" data-key="` + rep.Penalized[0].Key + `">`,
		`data-action="pardon" data-hash="` + rep.Penalized[0].Key + `"`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if n := len(regexp.MustCompile(`<tr class="hot-key"`).FindAllString(html, -1)); n != 2 {
		t.Errorf("%d hot-key rows, want 2", n)
	}
	act := func(path, body string) int {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		page.ServeHTTP(w, r)
		return w.Code
	}
	if code := act("/pardon", `{"hash": "`+rep.Penalized[0].Key+`"}`); code != http.StatusOK {
		t.Fatalf("pardon by hash: %d", code)
	}
	if code := act("/reset", `{"rule": "per-ip", "hash": "`+rep.HotKeys[0].Key+`"}`); code != http.StatusOK {
		t.Fatalf("reset by hash: %d", code)
	}
	if d := decide(loud); !d.Allowed {
		t.Fatalf("the pardoned, reset client: %+v", d)
	}
	if code := act("/reset", `{"rule": "per-ip", "hash": "h:1", "key": "x"}`); code != http.StatusBadRequest {
		t.Errorf("a body with a key and a hash: %d, want 400", code)
	}
	if code := act("/reset", `{"rule": "per-ip", "hash": "192.0.2.66"}`); code != http.StatusUnprocessableEntity {
		t.Errorf("a hash that is not one: %d, want 422", code)
	}
}

// TestPageSaysWhenTheStoreCannotListKeys: a store without
// store.KeyLister gives no hot keys (null) and a note saying why; a page
// without actions has no buttons.
func TestPageSaysWhenTheStoreCannotListKeys(t *testing.T) {
	clk := newFakeClock()
	c, err := shed.New([]shed.Rule{{Name: "per-user", Identity: shed.User, Algorithm: shed.FixedWindow, Limit: 3, Window: time.Hour}},
		shed.WithClock(clk.now), shed.WithStore(healthStore{Store: store.NewMemory()}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	page := newPage(t, c, clk)
	rep := page.Report()
	if rep.HotKeys != nil || !strings.Contains(rep.HotKeysNote, "cannot list its keys") || rep.Penalized != nil || rep.Actions {
		t.Errorf("report: hot keys %v note %q penalized %v actions %v", rep.HotKeys, rep.HotKeysNote, rep.Penalized, rep.Actions)
	}
	_, html := serve(t, page, http.MethodGet, "/")
	if !strings.Contains(html, `id="hot-keys-note"`) || strings.Contains(html, `class="act"`) {
		t.Error("the page lacks the note, or has action buttons without WithActions")
	}
	if _, err := statuspage.New(c, statuspage.WithTopKeys(0)); err == nil {
		t.Error("WithTopKeys(0) accepted")
	}
}
