package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// TestRegistryNeverReusesAnID: a removed limit's name is free again, its
// ID is not; Replace keeps the ID and asks check first.
func TestRegistryNeverReusesAnID(t *testing.T) {
	var r store.Registry[string]
	a, b := "a", "b"
	id, err := r.Add("x", &a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add("x", &b); err == nil {
		t.Fatal("a name taken twice")
	}
	if err := r.Remove(id, func(*string) string { return "x" }); err != nil {
		t.Fatal(err)
	}
	if r.Lookup(id) != nil {
		t.Fatal("a removed limit is still found")
	}
	id2, err := r.Add("x", &b)
	if err != nil || id2 == id {
		t.Fatalf("re-added under ID %d (was %d): %v", id2, id, err)
	}
	refused := errors.New("no")
	if err := r.Replace(id2, &a, func(*string) error { return refused }); !errors.Is(err, refused) || *r.Lookup(id2) != "b" {
		t.Fatalf("a refused Replace: %v, now %q", err, *r.Lookup(id2))
	}
	if err := r.Replace(id2, &a, func(*string) error { return nil }); err != nil || *r.Lookup(id2) != "a" {
		t.Fatalf("Replace: %v", err)
	}
	if err := r.Replace(id, &a, func(*string) error { return nil }); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("Replace of a removed limit: %v", err)
	}
}

// TestCheckInPlace: a network store changes only the limit (and a lease
// TTL) in place.
func TestCheckInPlace(t *testing.T) {
	was := store.Spec{Name: "d", Algorithm: store.FixedWindow, Limit: 3, Window: 24 * time.Hour}
	ok := was
	ok.Limit = 4
	if err := store.CheckInPlace(was, ok, "X"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []store.Spec{
		{Name: "e", Algorithm: store.FixedWindow, Limit: 3, Window: 24 * time.Hour},
		{Name: "d", Algorithm: store.FixedWindow, Limit: 3, Window: time.Hour},
	} {
		if err := store.CheckInPlace(was, bad, "X"); err == nil {
			t.Errorf("%+v changed in place", bad)
		}
	}
}

// TestRegistryReleaseNoneNeverHoldsALease: a store that keeps no leases
// answers every Release with an error that says why: a lease not held, a
// limit it does not hold, or one that is no concurrency limit.
func TestRegistryReleaseNoneNeverHoldsALease(t *testing.T) {
	var r store.Registry[string]
	a := "a"
	id, err := r.Add("x", &a)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ReleaseNone(store.Lease{}); !errors.Is(err, store.ErrLeaseNotHeld) {
		t.Fatalf("an empty lease: %v", err)
	}
	if err := r.ReleaseNone(store.Lease{Limit: id + 1, ID: 1, Cost: 1}); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("a lease of a limit not held: %v", err)
	}
	err = r.ReleaseNone(store.Lease{Limit: id, ID: 1, Cost: 1})
	if err == nil || errors.Is(err, store.ErrLeaseNotHeld) || errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("a lease of a rate limit: %v", err)
	}
}
