package mysqlstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestRefundOnAFormerProcedureNamesMigrate: a refund procedure of a former
// version (it took no paid-off instants) fails a Refund with
// ErrUnavailable naming Migrate, and Migrate replaces it.
func TestRefundOnAFormerProcedureNamesMigrate(t *testing.T) {
	db := sharedDB(t)
	s := newStore(t, db)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE OR REPLACE PROCEDURE `"+s.Prefix()+
		"_refund`(IN req LONGTEXT, IN ord LONGTEXT, IN at BIGINT) SELECT 0"); err != nil {
		t.Fatal(err)
	}
	id := storetest.MustRegister(t, s, store.Spec{Name: "bucket", Algorithm: store.TokenBucket, Limit: 2,
		Rate: ratelimit.Rate{Count: 2, Per: time.Hour}})
	res := storetest.Decide(t, s, id, "k", 1)
	var req store.Request
	req.Add(id, "k", 1)
	if err := s.Refund(ctx, &req, res); !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("Refund on the former procedure: %v, want ErrUnavailable naming Migrate", err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Refund(ctx, &req, res); err != nil {
		t.Fatalf("Refund after Migrate: %v", err)
	}
	if d := storetest.Decide(t, s, id, "k", 0).Hits[0].Decision; d.Remaining != 2 {
		t.Errorf("after the refund: Remaining %d, want 2", d.Remaining)
	}
}
