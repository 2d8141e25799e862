package sim

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
)

// WriteCSVFiles writes one time-series CSV per report into dir (created if
// needed), named <scenario>_<controller>.csv.
func WriteCSVFiles(dir string, reports []Report) error {
	if err := makeDir(dir); err != nil {
		return err
	}
	for _, r := range reports {
		if err := writeFile(filepath.Join(dir, r.Scenario+"_"+r.Controller+".csv"), r.WriteCSV); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, write func(w *bufio.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	w := bufio.NewWriter(f)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	return nil
}

func makeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	return nil
}
