package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// gentrace writes a trace that replay reads through a seed policy, as a
// table and as JSON.
func TestGentraceReplay(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.csv")
	var out, errb bytes.Buffer
	if err := gentraceCmd([]string{"-duration", "30m", "-users", "200", "-o", trace}, &out, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	pol := filepath.Join("..", "..", "examples", "policies", "login.json")
	out.Reset()
	if err := replayCmd([]string{"-policy", pol, trace}, &out, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	for _, s := range []string{"login-account", "login-ip", "recommended"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}
	if !strings.Contains(errb.String(), "records/s") {
		t.Errorf("no replay rate in %q", errb.String())
	}
	out.Reset()
	if err := replayCmd([]string{"-policy", pol, "-json", trace}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Records int64
		Rules   []struct{ Rule string }
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Records == 0 || len(rep.Rules) != 2 {
		t.Fatalf("JSON report %+v: %v", rep, err)
	}
	if err := replayCmd([]string{trace}, &out, &errb); err == nil {
		t.Error("replay without a policy accepted")
	}
	if err := replayCmd([]string{"-policy", pol, "-format", "xml", trace}, &out, &errb); err == nil {
		t.Error("unknown format accepted")
	}
}
