package mysqlstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/mysqlstore"
)

// requireMySQL reports whether a missing MariaDB fails the tests instead
// of skipping them.
func requireMySQL() bool { return os.Getenv("SLUICE_REQUIRE_MYSQL") == "1" }

// sharedDSN is the shared MariaDB of the tests.
func sharedDSN() string {
	if d := os.Getenv("SLUICE_MYSQL_DSN"); d != "" {
		return d
	}
	return "root@tcp(127.0.0.1:3306)/test?timeout=2s"
}

// openDB returns a pool of dsn, closed at the end of the test.
func openDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("SLUICE_MYSQL_DSN does not parse: %v", err)
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// sharedDB returns a pool of the shared MariaDB, or skips the test when it
// does not answer (fails it under SLUICE_REQUIRE_MYSQL=1).
func sharedDB(t testing.TB) *sql.DB {
	t.Helper()
	db := openDB(t, sharedDSN())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		cfg, _ := mysql.ParseDSN(sharedDSN())
		at := cfg.Addr + "/" + cfg.DBName // without user and password
		if requireMySQL() {
			t.Fatalf("MariaDB at %s does not answer (SLUICE_REQUIRE_MYSQL=1): %v", at, err)
		}
		t.Skipf("MariaDB at %s does not answer (set SLUICE_MYSQL_DSN, or SLUICE_REQUIRE_MYSQL=1 to fail): %v", at, err)
	}
	return db
}

// testPrefix returns a prefix unique to this call.
func testPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "sluice_test_" + hex.EncodeToString(b[:])
}

// newStore returns a migrated Store on db under a prefix of its own, whose
// table and routines are dropped when the test ends; nothing else is
// touched.
func newStore(t testing.TB, db *sql.DB, opts ...mysqlstore.Option) *mysqlstore.Store {
	t.Helper()
	s, err := mysqlstore.New(db, append([]mysqlstore.Option{mysqlstore.WithPrefix(testPrefix()), mysqlstore.WithTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Drop(ctx); err != nil {
			t.Errorf("dropping %s: %v", s.Prefix(), err)
		}
	})
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func mustRegister(t testing.TB, s store.Store, spec store.Spec) store.LimitID {
	t.Helper()
	id, err := s.Register(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// decide decides one hit and fails the test on an error.
func decide(t testing.TB, s store.Store, id store.LimitID, key string, cost int64) *store.Result {
	t.Helper()
	var req store.Request
	req.Add(id, key, cost)
	res := new(store.Result)
	if err := s.Decide(context.Background(), &req, res); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return res
}
