package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestWorkedCountsExactlyTheRequestsWhoseWorkRan: behind a static limit of
// one, a request admitted while another holds the limit is shed and not
// counted; one whose context ends in the downstream wait after its CPU
// work is counted; every request is counted as reaching the chain.
func TestWorkedCountsExactlyTheRequestsWhoseWorkRan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep, err := newEndpoint(1, 20*time.Millisecond, 0)
		if err != nil {
			t.Fatal(err)
		}
		prot, err := newProtection("static", protectionConfig{static: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer prot.close()
		var requests, inflight atomic.Int64
		h := counted(prot.wrap(ep), &requests, &inflight)
		serve := func(ctx context.Context) int {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
			return rec.Code
		}

		first := make(chan int)
		go func() { first <- serve(context.Background()) }()
		synctest.Wait() // the first holds the only permit, in its wait
		if inflight.Load() != 1 || ep.worked.Load() != 1 {
			t.Fatalf("with one request waiting: inflight %d, worked %d; want 1 and 1", inflight.Load(), ep.worked.Load())
		}
		for range 2 {
			if code := serve(context.Background()); code != http.StatusServiceUnavailable {
				t.Errorf("a request over the limit answered %d, want 503", code)
			}
		}
		if code := <-first; code != http.StatusOK {
			t.Errorf("the admitted request answered %d, want 200", code)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		if code := serve(ctx); code != http.StatusGatewayTimeout {
			t.Errorf("a request whose context ends in the wait answered %d, want 504", code)
		}
		if requests.Load() != 4 || ep.worked.Load() != 2 || inflight.Load() != 0 {
			t.Errorf("requests %d, worked %d, inflight %d; want 4, 2 (the 200 and the 504) and 0", requests.Load(), ep.worked.Load(), inflight.Load())
		}
	})
}
