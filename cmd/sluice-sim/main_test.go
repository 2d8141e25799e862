package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRunWritesFiles(t *testing.T) {
	dir := t.TempDir()
	if err := run(true, "overload2x", "sluice", 1, filepath.Join(dir, "csv"), filepath.Join(dir, "svg")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"csv/overload2x_sluice.csv", "svg/overload2x.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if err := run(true, "critical3x", "priority", 1, "", ""); err != nil {
		t.Error(err)
	}
	if err := run(true, "nope", "", 1, "", ""); err == nil {
		t.Error("unknown scenario accepted")
	}
	if err := run(true, "unloaded", "nope", 1, "", ""); err == nil {
		t.Error("unknown controller accepted")
	}
}
