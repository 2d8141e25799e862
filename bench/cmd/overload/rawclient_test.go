package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestReadResponseReadsEachBodyKind(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		status   int
		keep     bool
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200, true},
		{"chunked", "HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nTrailer: 1\r\n\r\n", 503, true},
		{"close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", 200, false},
		{"no length", "HTTP/1.1 200 OK\r\n\r\nuntil the end", 200, false},
		{"no body", "HTTP/1.1 204 No Content\r\n\r\n", 204, true},
		{"1.0", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", 200, false},
	} {
		br := bufio.NewReader(strings.NewReader(tc.in + "NEXT"))
		status, keep, err := readResponse(br)
		if err != nil || status != tc.status || keep != tc.keep {
			t.Fatalf("%s: %d %v %v, want %d %v", tc.name, status, keep, err, tc.status, tc.keep)
		}
		if rest, _ := io.ReadAll(br); keep && string(rest) != "NEXT" {
			t.Fatalf("%s: left %q after the response, want the next one", tc.name, rest)
		}
	}
	for _, bad := range []string{"HTTP/1.1 abc OK\r\n\r\n", "SSH-2.0\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nbad header\r\n\r\n", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort"} {
		if _, _, err := readResponse(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Fatalf("%q: no error", bad)
		}
	}
}

// Against a real server: requests share one kept-alive connection, a
// Connection: close answer makes the next request dial, and a request not
// answered by its deadline returns an error that is
// context.DeadlineExceeded and gives its connection up.
func TestRawClientKeepsAliveRedialsAndTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/close":
			w.Header().Set("Connection", "close")
		case "/slow":
			<-release
		}
		w.WriteHeader(http.StatusTeapot)
	}))
	defer srv.Close()
	defer close(release)
	var dials atomic.Int64
	do := func(path string, d time.Duration) (int, error) {
		rc, err := newRawClient(srv.URL+path, &dials)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.close()
		return rc.do(time.Now().Add(d))
	}
	rc, err := newRawClient(srv.URL+"/", &dials)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if s, err := rc.do(time.Now().Add(5 * time.Second)); s != http.StatusTeapot || err != nil {
			t.Fatalf("%d %v", s, err)
		}
	}
	rc.close()
	if dials.Load() != 1 {
		t.Fatalf("%d dials for 3 kept-alive requests", dials.Load())
	}
	if s, err := do("/close", 5*time.Second); s != http.StatusTeapot || err != nil {
		t.Fatalf("close: %d %v", s, err)
	}
	if _, err := do("/slow", 50*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow: %v, want a deadline error", err)
	}
	if _, err := newRawClient("https://x/", &dials); err == nil {
		t.Fatal("https accepted")
	}
}
