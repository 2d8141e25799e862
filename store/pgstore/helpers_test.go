package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/store/pgstore"
	"github.com/sluicehq/sluice/store/storetest"
)

// sharedURL is the shared PostgreSQL of the tests.
func sharedURL() string {
	if u := os.Getenv("SLUICE_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable&connect_timeout=2"
}

// newPool returns a pool of url, closed at the end of the test.
func newPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("SLUICE_POSTGRES_URL does not parse: %v", err)
	}
	cfg.MaxConns = 16
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// sharedPool returns a pool of the shared PostgreSQL, or skips the test
// when it does not answer (fails it under SLUICE_REQUIRE_POSTGRES=1).
func sharedPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	p := newPool(t, sharedURL())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := p.Ping(ctx); err != nil {
		// The address without the URL's user and password.
		c := p.Config().ConnConfig
		at := fmt.Sprintf("%s:%d/%s", c.Host, c.Port, c.Database)
		storetest.Missing(t, "SLUICE_REQUIRE_POSTGRES", "PostgreSQL at "+at+" does not answer (point SLUICE_POSTGRES_URL at one)", err)
	}
	return p
}

// testSchema returns a schema name unique to this call, dropped (with
// everything in it) when the test ends; nothing else is touched.
func testSchema(t testing.TB, p *pgxpool.Pool) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "sluice_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := p.Exec(ctx, `DROP SCHEMA IF EXISTS "`+name+`" CASCADE`); err != nil {
			t.Errorf("dropping schema %s: %v", name, err)
		}
	})
	return name
}

// newStore returns a migrated Store on p in a schema of its own.
func newStore(t testing.TB, p *pgxpool.Pool, opts ...pgstore.Option) *pgstore.Store {
	t.Helper()
	return newStoreOn(t, p, p, opts...)
}

// newStoreOn returns a migrated Store on p in a schema of its own, which
// admin drops when the test ends (p's sessions may be gone by then): a
// deadline of 5s unless opts say otherwise.
func newStoreOn(t testing.TB, p, admin *pgxpool.Pool, opts ...pgstore.Option) *pgstore.Store {
	t.Helper()
	s, err := pgstore.New(p, append([]pgstore.Option{pgstore.WithSchema(testSchema(t, admin)), pgstore.WithTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}
