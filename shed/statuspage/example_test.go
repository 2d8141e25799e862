package statuspage_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/statuspage"
)

// Mounting the status page under /debug/sluice/ and reading its JSON
// report as a script would. A long-running service would also start
// go page.Run(ctx), for the chart to cover the last minutes.
func Example() {
	sluice, err := shed.New([]shed.Rule{{Name: "inflight", Algorithm: shed.Concurrency, Limit: 100}})
	if err != nil {
		panic(err)
	}
	page, err := statuspage.New(sluice)
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/debug/sluice/", http.StripPrefix("/debug/sluice", page))

	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/debug/sluice/json", nil))
	var rep statuspage.Report
	if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil {
		panic(err)
	}
	for _, r := range rep.Rules {
		fmt.Printf("%s: %s %s, limit %d, inflight %d\n", r.Name, r.Identity, r.Algorithm, r.Limit, r.Inflight)
	}
	// Output:
	// inflight: global concurrency, limit 100, inflight 0
}
