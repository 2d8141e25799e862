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

	"github.com/sluicehq/sluice/store/mysqlstore"
	"github.com/sluicehq/sluice/store/storetest"
)

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
		storetest.Missing(t, "SLUICE_REQUIRE_MYSQL", "MariaDB at "+at+" does not answer (point SLUICE_MYSQL_DSN at one)", err)
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

// holdRow locks key k's state row of s in a transaction of its own, which
// the test ends, and returns it with its session's id.
func holdRow(t *testing.T, db *sql.DB, s *mysqlstore.Store, k string) (*sql.Tx, int64) {
	t.Helper()
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	if _, err := tx.Exec("SELECT a FROM `"+s.Prefix()+"_state` WHERE k = ? FOR UPDATE", k); err != nil {
		t.Fatal(err)
	}
	var holder int64
	if err := tx.QueryRow("SELECT CONNECTION_ID()").Scan(&holder); err != nil {
		t.Fatal(err)
	}
	return tx, holder
}

// decisionSessions returns the ids of the sessions running a statement on
// s's state table, found by the statement (the prefix is the test's), never
// the lock holder's, which may still show its last statement for a moment.
func decisionSessions(db *sql.DB, s *mysqlstore.Store, holder int64) ([]int64, error) {
	rows, err := db.Query("SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND INFO NOT LIKE '%PROCESSLIST%' AND ID <> CONNECTION_ID() AND ID <> ?",
		"%"+s.Prefix()+"_state%", holder)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
