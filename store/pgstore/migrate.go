package pgstore

import (
	"context"
	_ "embed"
	"fmt"
)

//go:embed schema.sql
var schemaSrc string

// migrateLock is the advisory lock number under which Migrate runs, so that
// instances migrating at once do not race on CREATE OR REPLACE FUNCTION.
const migrateLock = 0x736c7569636570 // "sluicep"

// Migrate creates the store's schema, its table of state and its functions,
// or brings them to this version: every statement is idempotent, and runs
// in one transaction, so a failed Migrate changes nothing. Call it once at
// deployment or start-up, before the first decision; a Store never creates
// its schema by itself. Instances may call it at once (they take turns on
// an advisory lock). It runs under ctx alone, not the per-call deadline,
// and blocks until done. Its error starts with "pgstore: ".
func (s *Store) Migrate(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: migrate %s: %w", s.schema, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLock)); err != nil {
		return fmt.Errorf("pgstore: migrate %s: %w", s.schema, err)
	}
	if _, err := tx.Exec(ctx, schemaSQL(s.schema)); err != nil {
		return fmt.Errorf("pgstore: migrate %s: %w", s.schema, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: migrate %s: %w", s.schema, err)
	}
	return nil
}
