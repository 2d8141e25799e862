package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/sluicehq/sluice/examples/internal/demo"
)

// answer is what one login attempt got back.
type answer struct {
	label, user                 string
	status                      int
	retryAfter, rateLimit, kind string // kind: the problem type of a rejection
}

// selfTest serves the endpoint on 127.0.0.1:0 and, from that one IP: tries
// a login while the limit store is down, then guesses alice's password 8
// times, then tries bob. It prints every answer and returns them.
func selfTest(out io.Writer) ([]answer, error) {
	h, storeDown, err := newHandler()
	if err != nil {
		return nil, err
	}
	srv, err := demo.Serve(h)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	endpoint := srv.URL + "/login"

	var got []answer
	try := func(label, user string) error {
		r, err := srv.PostForm("/login", url.Values{"user": {user}, "password": {"guess"}})
		if err != nil {
			return err
		}
		a := answer{label: label, user: user, status: r.Status,
			retryAfter: r.Header.Get("Retry-After"), rateLimit: r.Header.Get("RateLimit")}
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/problem+json") {
			var p struct{ Type string }
			if err := json.Unmarshal(r.Body, &p); err == nil {
				a.kind = p.Type[strings.LastIndexByte(p.Type, '#')+1:]
			}
		}
		got = append(got, a)
		fmt.Fprintf(out, "  %-8s %d  Retry-After: %-4s RateLimit: %-22s %s\n",
			a.label, a.status, a.retryAfter, a.rateLimit, a.kind)
		return nil
	}

	fmt.Fprintf(out, "POST %s, every attempt from 127.0.0.1 with a wrong password\n", endpoint)
	fmt.Fprintln(out, "the limit store is down: the rules fail closed")
	storeDown.Store(true)
	if err := try("alice", "alice"); err != nil {
		return got, err
	}
	storeDown.Store(false)
	fmt.Fprintln(out, "the store is back: 8 guesses for alice (5 per account), then bob")
	for i := range 8 {
		if err := try(fmt.Sprintf("alice %d", i+1), "alice"); err != nil {
			return got, err
		}
	}
	if err := try("bob", "bob"); err != nil {
		return got, err
	}
	fmt.Fprintln(out, "alice's 6th guess hit her account's limit; three such rejections put the IP in a timeout, bob included")
	return got, nil
}
