package upstream

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/ratelimit"
)

// TestTransportRealServer runs the Transport over real loopback sockets
// (outside synctest, so in real time; about 650 ms of pacing): eight
// clients send 24 requests through a pacing Transport to an
// httptest.Server that enforces its published 40/s, with a burst of 10,
// and answers 429 over it. None comes back 429, and the Transport leaks no
// goroutine. In real time the server decides when a request arrives, not
// when it was sent: its burst absorbs up to about 250 ms of scheduling
// jitter on a loaded machine (with a burst of 2, runs under -race on two
// busy cores did see 429s).
func TestTransportRealServer(t *testing.T) {
	defer goleak.VerifyNone(t)
	up := newLimitedUpstream(ratelimit.Per(40, time.Second), 10, noHeaders)
	srv := httptest.NewServer(up)
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport)
	defer base.CloseIdleConnections()
	tr, err := NewTransport(base, ratelimit.Per(40, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 24)
	for range 8 {
		wg.Go(func() {
			for range 3 {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					errs <- err
					return
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ok, r429 := up.counts()
	if ok != 24 || r429 != 0 {
		t.Fatalf("fake upstream: %d ok, %d 429; want 24 ok, no 429", ok, r429)
	}
}
