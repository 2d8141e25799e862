package demo

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Loopback is a handler served on 127.0.0.1:0 and an HTTP client of it, for
// a self-test. Its methods are safe for concurrent use; Close it when done.
type Loopback struct {
	// URL is the server's base URL, "http://127.0.0.1:port".
	URL string
	// Client sends requests to the server: a 10 s timeout, and idle
	// connections kept for up to 32 concurrent callers.
	Client *http.Client
	srv    *http.Server
	tr     *http.Transport
}

// Serve serves h on a free port of 127.0.0.1 and returns it with a client.
// It returns an error when it cannot listen.
func Serve(h http.Handler) (*Loopback, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Loopback{
		URL: "http://" + ln.Addr().String(),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second},
		tr:  &http.Transport{MaxIdleConnsPerHost: 32},
	}
	l.Client = &http.Client{Transport: l.tr, Timeout: 10 * time.Second}
	go l.srv.Serve(ln) // returns ErrServerClosed at Close
	return l, nil
}

// Close stops the server, with the requests it is serving, and closes the
// client's idle connections, so that no goroutine of either is left.
func (l *Loopback) Close() {
	l.srv.Close()
	l.tr.CloseIdleConnections()
}

// Reply is a response read whole.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// maxBody bounds the body a Reply holds.
const maxBody = 1 << 20

// Do sends req and reads its response whole (the body up to 1 MiB). It
// returns the client's error, or the error of reading the body.
func (l *Loopback) Do(req *http.Request) (Reply, error) {
	resp, err := l.Client.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	return Reply{Status: resp.StatusCode, Header: resp.Header, Body: body}, err
}

// Get sends GET path with the given header fields, in pairs of name and
// value ("X-Tenant", "acme"). It returns an error for an odd number of
// header strings, and the errors of Do.
func (l *Loopback) Get(path string, header ...string) (Reply, error) {
	if len(header)%2 != 0 {
		return Reply{}, errors.New("demo: header fields come in pairs of name and value")
	}
	req, err := http.NewRequest(http.MethodGet, l.URL+path, nil)
	if err != nil {
		return Reply{}, err
	}
	for i := 0; i < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return l.Do(req)
}

// PostForm sends POST path with form, URL-encoded, as its body. It returns
// the errors of Do.
func (l *Loopback) PostForm(path string, form url.Values) (Reply, error) {
	req, err := http.NewRequest(http.MethodPost, l.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		return Reply{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return l.Do(req)
}

// Await polls cond every millisecond until it holds, for at most 10 s, and
// reports whether it held: for a self-test to wait until the server is in
// the state its next step needs.
func Await(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}
