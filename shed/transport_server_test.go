package shed

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/concurrency"
)

// TestTransportRealServer runs the Transport over real loopback sockets
// (outside synctest, so in real time; bounded to a few hundred ms of
// pacing): eight clients send 24 requests to an httptest.Server that
// enforces 40/s with a burst of 2 and answers 429 over it. None comes back
// 429, and the Transport leaks no goroutine.
func TestTransportRealServer(t *testing.T) {
	defer goleak.VerifyNone(t)
	up := newTransportLimitedUpstream(concurrency.Per(40, time.Second), 2, transportNoHeaders)
	srv := httptest.NewServer(up)
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport)
	defer base.CloseIdleConnections()
	tr, err := NewTransport(base, concurrency.Per(40, time.Second), WithTransportBurst(2))
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
		t.Fatalf("upstream: %d ok, %d 429; want 24 ok, no 429", ok, r429)
	}
}
