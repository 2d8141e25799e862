package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/sim"
)

// replayCmd is `sluice-sim replay -policy FILE [-format F] [-json] [TRACE]`:
// it plays a trace (a file, or standard input) through a policy in virtual
// time and prints what each rule would have done, with recommended limits,
// and the replay rate on standard error.
func replayCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pol := fs.String("policy", "", "policy file (JSON) to replay the trace through")
	format := fs.String("format", "", "trace format: csv, jsonl or accesslog (default: from the file name; csv for stdin)")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of tables")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pol == "" || fs.NArg() > 1 {
		return errors.New("usage: sluice-sim replay -policy FILE [-format csv|jsonl|accesslog] [-json] [TRACE]")
	}
	p, err := policy.Load(*pol)
	if err != nil {
		return err
	}
	in, name := io.Reader(os.Stdin), "-"
	if fs.NArg() == 1 {
		name = fs.Arg(0)
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	tr, err := openTrace(in, name, *format)
	if err != nil {
		return err
	}
	start := time.Now()
	rep, err := sim.Replay(p, tr)
	if err != nil {
		return err
	}
	took := time.Since(start)
	fmt.Fprintf(stderr, "replayed %d records (%v of traffic) in %v: %.0f records/s\n",
		rep.Records, rep.Span.Round(time.Second), took.Round(time.Millisecond), float64(rep.Records)/took.Seconds())
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.WriteTable(stdout)
}

func openTrace(in io.Reader, name, format string) (sim.TraceReader, error) {
	if format == "" {
		switch {
		case strings.HasSuffix(name, ".jsonl") || strings.HasSuffix(name, ".json"):
			format = "jsonl"
		case strings.HasSuffix(name, ".log"):
			format = "accesslog"
		default:
			format = "csv"
		}
	}
	switch format {
	case "csv":
		return sim.NewCSVReader(in)
	case "jsonl":
		return sim.NewJSONReader(in), nil
	case "accesslog":
		return sim.NewAccessLogReader(in), nil
	}
	return nil, fmt.Errorf("unknown trace format %q (csv, jsonl, accesslog)", format)
}

// gentraceCmd is `sluice-sim gentrace [flags]`: it writes a synthetic CSV
// trace to standard output (or -o FILE).
func gentraceCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gentrace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var s sim.TraceSpec
	fs.Uint64Var(&s.Seed, "seed", 1, "random seed")
	fs.DurationVar(&s.Duration, "duration", 24*time.Hour, "trace length")
	fs.IntVar(&s.Users, "users", 5000, "legitimate users")
	fs.Float64Var(&s.UserRate, "user-rate", 0.2, "requests a minute per user (daily mean)")
	fs.Float64Var(&s.Diurnal, "diurnal", 0.6, "daily cycle amplitude in [0, 1)")
	fs.Float64Var(&s.WriteShare, "write-share", 0.1, "share of user requests that are writes")
	fs.Float64Var(&s.LoginShare, "login-share", 0.01, "share of user requests that are logins")
	fs.IntVar(&s.CGNATUsers, "cgnat-users", 20, "users behind the scraper's CGNAT address")
	fs.IntVar(&s.Automation, "automation", 3, "heavy legitimate automation clients")
	fs.Float64Var(&s.AutomationRate, "automation-rate", 60, "requests a minute per automation client")
	fs.IntVar(&s.BotnetIPs, "botnet-ips", 2000, "addresses the credential-stuffing botnet rotates through")
	fs.Float64Var(&s.BotnetRate, "botnet-rate", 30, "login attempts a minute from the botnet")
	fs.IntVar(&s.BotnetPerIP, "botnet-per-ip", 3, "attempts per address before rotating")
	fs.IntVar(&s.BotnetTargets, "botnet-targets", 500, "accounts the botnet tries")
	fs.Float64Var(&s.ScraperRate, "scraper-rate", 120, "requests a minute from the scraper")
	out := fs.String("o", "", "output file (default standard output)")
	start := fs.String("start", "2026-11-23T00:00:00Z", "trace start (RFC 3339)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339, *start)
	if err != nil {
		return err
	}
	s.Start = t
	g, err := sim.NewGenerator(s)
	if err != nil {
		return err
	}
	w := stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	bw.WriteString(sim.CSVHeader + "\n")
	var rec sim.Record
	n := 0
	for {
		if err := g.Next(&rec); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		if err := sim.WriteCSVRecord(bw, &rec); err != nil {
			return err
		}
		n++
	}
	fmt.Fprintf(stderr, "wrote %d records\n", n)
	return bw.Flush()
}
