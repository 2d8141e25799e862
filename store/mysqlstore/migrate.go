package mysqlstore

import (
	"context"
	_ "embed"
	"fmt"
)

//go:embed schema.sql
var schemaSrc string

// Migrate creates the store's table and routines, or brings them to this
// version: every statement is idempotent (CREATE TABLE IF NOT EXISTS,
// CREATE OR REPLACE), so a Migrate that failed half-way is completed by
// the next (MariaDB does not roll DDL back). Call it once at deployment or
// start-up, before the first decision; a Store never creates them by
// itself. Instances may call it at once: they take turns on a named lock
// (GET_LOCK of the prefix). Besides the state table it creates
// prefix_members, the heartbeats of NewFallback's instances. It needs the
// privileges CREATE, ALTER ROUTINE and CREATE ROUTINE on the database,
// runs under ctx alone, not the per-call deadline, and blocks until done. Its error starts with
// "mysqlstore: ".
func (s *Store) Migrate(ctx context.Context) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("mysqlstore: migrate %s: %w", s.prefix, err)
	}
	defer conn.Close()
	lock := "sluice_migrate_" + s.prefix
	var got int
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 60)", lock).Scan(&got); err != nil || got != 1 {
		return fmt.Errorf("mysqlstore: migrate %s: the migration lock: got %d, %v", s.prefix, got, err)
	}
	defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(?)", lock) }()
	for _, stmt := range s.schemaStatements() {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("mysqlstore: migrate %s: %w", s.prefix, err)
		}
	}
	return nil
}

// Drop deletes the store's table and routines, and with them every limit's
// state under the prefix: for tests and for taking a deployment down. It
// runs under ctx alone. Its error starts with "mysqlstore: ".
func (s *Store) Drop(ctx context.Context) error {
	for _, stmt := range []string{
		"DROP PROCEDURE IF EXISTS " + object(s.prefix, "decide"),
		"DROP PROCEDURE IF EXISTS " + object(s.prefix, "cleanup"),
		"DROP PROCEDURE IF EXISTS " + object(s.prefix, "refund"),
		"DROP FUNCTION IF EXISTS " + object(s.prefix, "window_at"),
		"DROP FUNCTION IF EXISTS " + object(s.prefix, "real_at"),
		"DROP PROCEDURE IF EXISTS " + object(s.prefix, "beat"),
		"DROP TABLE IF EXISTS " + object(s.prefix, "members"),
		"DROP TABLE IF EXISTS " + s.stateTable,
	} {
		if _, err := s.db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("mysqlstore: drop %s: %w", s.prefix, err)
		}
	}
	return nil
}
