package sqlquota

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// TestLimitsRefuseWhatTheStoreCannotKeep: a name over MaxName, a name that
// is not text where Text is set, an algorithm the store does not keep and
// a key over MaxKey are errors starting with "store: " that name the
// backend, and a hit of a limit not registered matches
// store.ErrUnknownLimit; what the store keeps registers and is found.
func TestLimitsRefuseWhatTheStoreCannotKeep(t *testing.T) {
	fixed := store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 5, Window: time.Hour}
	named := func(name string) store.Spec { s := fixed; s.Name = name; return s }
	sliding := fixed
	sliding.Name, sliding.Algorithm = "s", store.SlidingWindow
	bounded := &Limits{Backend: "Bounded", MaxName: 4, MaxKey: 3}
	text := &Limits{Backend: "Text", Text: true, Sliding: true}
	for _, c := range []struct {
		ls   *Limits
		spec store.Spec
		want string // "" when it registers
	}{
		{bounded, named("abcd"), ""},
		{bounded, named("abcde"), "the Bounded store keeps names of at most 4 bytes, got 5"},
		{bounded, named("a\x00"), ""},
		{bounded, sliding, "the Bounded store keeps token buckets and fixed windows"},
		{text, named("é"), ""},
		{text, named("a\x00"), "the Text store needs a name of valid UTF-8 without NUL bytes"},
		{text, named("\xff"), "the Text store needs a name of valid UTF-8 without NUL bytes"},
		{text, sliding, ""},
	} {
		_, err := c.ls.Register(c.spec)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s, %q: %v", c.ls.Backend, c.spec.Name, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), "store: ") || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s, %q: %v, want %q", c.ls.Backend, c.spec.Name, err, c.want)
		}
	}

	id := bounded.Lookup(1)
	if id == nil || id.Spec.Name != "abcd" {
		t.Fatalf("the first limit registered: %+v", id)
	}
	var req store.Request
	req.Add(1, "abc", 1)
	var lim [store.MaxHits]*Limit
	if err := bounded.Hits(&req, &lim); err != nil || lim[0] != id {
		t.Fatalf("a key of MaxKey bytes: %v, %+v", err, lim[0])
	}
	req.Add(1, "abcd", 1)
	if err := bounded.Hits(&req, &lim); err == nil || !strings.Contains(err.Error(), "store: hit 1: the Bounded store keeps keys of at most 3 bytes, got 4") {
		t.Fatalf("a key over MaxKey: %v", err)
	}
	var unknown store.Request
	unknown.Add(9, "k", 1)
	if err := bounded.Hits(&unknown, &lim); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("a hit of a limit not registered: %v", err)
	}
	if _, err := bounded.Known(9); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("Known of a limit not registered: %v", err)
	}
}

// TestDecisionChecksTheCallFirst: Decision refuses a missing request or
// result, a malformed request and a max wait (naming Package) before it
// looks the hits up, and fills lim for a good call.
func TestDecisionChecksTheCallFirst(t *testing.T) {
	ls := &Limits{Backend: "Test", Package: "teststore"}
	id, err := ls.Register(store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 5, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var lim [store.MaxHits]*Limit
	var res store.Result
	if err := ls.Decision(nil, &res, &lim); err == nil || err.Error() != "store: Decide needs a request and a result" {
		t.Fatalf("no request: %v", err)
	}
	var empty store.Request
	if err := ls.Decision(&empty, &res, &lim); err == nil || errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("a request of no hits: %v", err)
	}
	var wait store.Request
	wait.Add(9, "k", 1) // unknown, but the max wait is refused first
	wait.Hits[0].MaxWait = time.Second
	if err := ls.Decision(&wait, &res, &lim); !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "teststore cannot reserve") {
		t.Fatalf("a max wait: %v", err)
	}
	var req store.Request
	req.Add(id, "k", 1)
	if err := ls.Decision(&req, &res, &lim); err != nil || lim[0] != ls.Lookup(id) {
		t.Fatalf("a good call: %v, %+v", err, lim[0])
	}
}

// TestCheckCleanupTakesAnInt32Count: Cleanup's limit is from 1 to
// 2^31-1, the error naming the package.
func TestCheckCleanupTakesAnInt32Count(t *testing.T) {
	ls := &Limits{Package: "teststore"}
	for _, n := range []int{1, 1000, 1<<31 - 1} {
		if err := ls.CheckCleanup(n); err != nil {
			t.Errorf("%d: %v", n, err)
		}
	}
	tooMany := 1<<31 - 1
	tooMany++ // 2^31 (where an int has 32 bits it wraps to a negative limit, refused too)
	for _, n := range []int{0, -1, tooMany} {
		if err := ls.CheckCleanup(n); err == nil || !strings.HasPrefix(err.Error(), "teststore: cleanup limit must be from 1 to 2^31-1") {
			t.Errorf("%d: %v", n, err)
		}
	}
}

// TestLimitsUpdateInPlaceOrNotAtAll: Update keeps the id and takes a new
// Limit, refuses a token bucket's new rate naming the backend (the limit
// unchanged), and an Unregistered id is unknown while its name is free.
func TestLimitsUpdateInPlaceOrNotAtAll(t *testing.T) {
	ls := &Limits{Backend: "Test"}
	bucket := store.Spec{Name: "b", Algorithm: store.TokenBucket, Limit: 5, Rate: ratelimit.Per(5, time.Second)}
	id, err := ls.Register(bucket)
	if err != nil {
		t.Fatal(err)
	}
	more := bucket
	more.Limit = 9
	if err := ls.Update(id, more); err != nil || ls.Lookup(id).Spec.Limit != 9 {
		t.Fatalf("a new burst in place: %v, %+v", err, ls.Lookup(id))
	}
	faster := more
	faster.Rate = ratelimit.Per(10, time.Second)
	if err := ls.Update(id, faster); err == nil || !strings.Contains(err.Error(), "the Test store cannot change a token bucket's rate in place") || ls.Lookup(id).Spec.Rate != more.Rate {
		t.Fatalf("a new rate: %v, %+v", err, ls.Lookup(id))
	}
	if err := ls.Unregister(id); err != nil {
		t.Fatal(err)
	}
	if _, err := ls.Known(id); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("an unregistered id: %v", err)
	}
	if err := ls.Update(id, more); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("Update of an unregistered id: %v", err)
	}
	if _, err := ls.Register(bucket); err != nil {
		t.Fatalf("the name of an unregistered limit again: %v", err)
	}
}
