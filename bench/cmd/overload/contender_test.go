package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestEveryContenderAdmitsAnIdleRequest: each protection, built as the
// benchmark builds it, lets a request through to the endpoint when idle.
func TestEveryContenderAdmitsAnIdleRequest(t *testing.T) {
	for _, name := range contenderNames {
		t.Run(name, func(t *testing.T) {
			p, err := newProtection(name, protectionConfig{static: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer p.close()
			h := p.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
			for range 3 {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
				if rec.Code != http.StatusOK {
					t.Fatalf("idle request answered %d, want 200", rec.Code)
				}
			}
		})
	}
}

func TestRejectContenderShedsEveryRequest(t *testing.T) {
	p, err := newProtection(rejectName, protectionConfig{static: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	h := p.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("the endpoint ran") }))
	for range 5 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("answered %d, want 503", rec.Code)
		}
	}
}

// TestStaticNeverAdmitsMoreThanItsLimit: with its limit of requests held
// in the endpoint, the oracle sheds the next one, and admits again once one
// is done.
func TestStaticNeverAdmitsMoreThanItsLimit(t *testing.T) {
	const limit = 3
	p, err := newProtection("static", protectionConfig{static: limit})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(limit)
	h := p.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			entered.Done()
			<-release
		}
	}))
	var held sync.WaitGroup
	for range limit {
		held.Go(func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/hold", nil)) })
	}
	entered.Wait()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("request %d answered %d, want 503", limit+1, rec.Code)
	}
	close(release)
	held.Wait()
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("after the holders left: %d, want 200", rec.Code)
	}
	if _, err := newProtection("static", protectionConfig{}); err == nil {
		t.Error("a static limit of 0 was accepted")
	}
}

// TestIOEndpointHonoursTheContext: a request whose context ends while every
// slot is taken leaves at once, and one that gets a slot takes the service
// time.
func TestIOEndpointHonoursTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := newEndpoint(0, 20*time.Millisecond, 1)
		if err != nil {
			t.Fatal(err)
		}
		first := httptest.NewRecorder()
		start := time.Now()
		done := make(chan time.Duration)
		go func() {
			e.ServeHTTP(first, httptest.NewRequest(http.MethodGet, "/", nil))
			done <- time.Since(start)
		}()
		synctest.Wait() // the first holds the only slot
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		second := httptest.NewRecorder()
		e.ServeHTTP(second, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
		if second.Code != http.StatusGatewayTimeout || time.Since(start) != 5*time.Millisecond {
			t.Errorf("the waiting request answered %d after %v, want 504 after 5ms", second.Code, time.Since(start))
		}
		if d := <-done; d != 20*time.Millisecond || first.Code != http.StatusOK {
			t.Errorf("the served request answered %d after %v, want 200 after 20ms", first.Code, d)
		}
	})
}
