package sim

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Label says what a traced request is known to be, when a trace says.
type Label uint8

const (
	// Unlabelled: the trace does not say.
	Unlabelled Label = iota
	// Legit: a legitimate client's request.
	Legit
	// Abusive: an abusive client's request.
	Abusive
)

// String returns "", "legit" or "abusive".
func (l Label) String() string {
	switch l {
	case Legit:
		return "legit"
	case Abusive:
		return "abusive"
	}
	return ""
}

func parseLabel(s string) (Label, error) {
	switch s {
	case "":
		return Unlabelled, nil
	case "legit":
		return Legit, nil
	case "abusive":
		return Abusive, nil
	}
	return 0, fmt.Errorf("label must be legit, abusive or empty, got %q", s)
}

// Record is one request of a traffic trace.
type Record struct {
	// Time is the request's wall time in Unix nanoseconds.
	Time int64
	// IP is the client address; User, APIKey, Tenant and Tier its
	// identities as the application knows them ("" for none).
	IP                         netip.Addr
	User, APIKey, Tenant, Tier string
	// Method and Route: the HTTP method and the route (pattern or path).
	Method, Route string
	Label         Label
}

// TraceReader reads Records one at a time: Next returns io.EOF at the end.
type TraceReader interface {
	Next(*Record) error
}

// CSVHeader is the header row of a CSV trace. Timestamps are RFC 3339 or
// Unix seconds (with a fraction).
const CSVHeader = "timestamp,ip,user,api_key,tenant,tier,method,route,label"

// NewCSVReader reads a CSV trace whose first row is CSVHeader (columns in
// any order; tier, api_key, tenant and label may be left out).
func NewCSVReader(r io.Reader) (TraceReader, error) {
	c := csv.NewReader(bufio.NewReaderSize(r, 1<<16))
	c.ReuseRecord = true
	head, err := c.Read()
	if err != nil {
		return nil, fmt.Errorf("sim: trace header: %w", err)
	}
	t := &csvTrace{r: c, col: map[string]int{}}
	for i, h := range head {
		t.col[strings.TrimSpace(h)] = i
	}
	for _, need := range []string{"timestamp", "method", "route"} {
		if _, ok := t.col[need]; !ok {
			return nil, fmt.Errorf("sim: trace header lacks %q (want %s)", need, CSVHeader)
		}
	}
	return t, nil
}

type csvTrace struct {
	r   *csv.Reader
	col map[string]int
}

func (t *csvTrace) field(row []string, name string) string {
	if i, ok := t.col[name]; ok && i < len(row) {
		return row[i]
	}
	return ""
}

func (t *csvTrace) Next(rec *Record) error {
	row, err := t.r.Read()
	if err != nil {
		if err == io.EOF {
			return err
		}
		return fmt.Errorf("sim: trace: %w", err)
	}
	line, _ := t.r.FieldPos(0)
	return fill(rec, line, t.field(row, "timestamp"), t.field(row, "ip"), t.field(row, "user"),
		t.field(row, "api_key"), t.field(row, "tenant"), t.field(row, "tier"), t.field(row, "method"),
		t.field(row, "route"), t.field(row, "label"))
}

// fill sets rec from the text fields of one trace line.
func fill(rec *Record, line int, ts, ip, user, key, tenant, tier, method, route, label string) error {
	*rec = Record{User: user, APIKey: key, Tenant: tenant, Tier: tier, Method: method, Route: route}
	var err error
	if rec.Time, err = parseTime(ts); err != nil {
		return fmt.Errorf("sim: trace line %d: %w", line, err)
	}
	if ip != "" {
		if rec.IP, err = netip.ParseAddr(ip); err != nil {
			return fmt.Errorf("sim: trace line %d: bad ip %q", line, ip)
		}
	}
	if rec.Label, err = parseLabel(label); err != nil {
		return fmt.Errorf("sim: trace line %d: %w", line, err)
	}
	if method == "" || route == "" {
		return fmt.Errorf("sim: trace line %d: method and route are required", line)
	}
	return nil
}

func parseTime(s string) (int64, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return int64(f * 1e9), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("bad timestamp %q (RFC 3339 or Unix seconds)", s)
	}
	return t.UnixNano(), nil
}

// jsonRecord is one line of a JSON-lines trace.
type jsonRecord struct {
	Timestamp json.RawMessage `json:"timestamp"`
	IP        string          `json:"ip"`
	User      string          `json:"user"`
	APIKey    string          `json:"api_key"`
	Tenant    string          `json:"tenant"`
	Tier      string          `json:"tier"`
	Method    string          `json:"method"`
	Route     string          `json:"route"`
	Label     string          `json:"label"`
}

// NewJSONReader reads a JSON-lines trace: one object per line with the
// fields of CSVHeader ("timestamp" a string in RFC 3339 or a number of
// Unix seconds).
func NewJSONReader(r io.Reader) TraceReader {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 1<<16), 1<<20)
	return &jsonTrace{s: s}
}

type jsonTrace struct {
	s    *bufio.Scanner
	line int
}

func (t *jsonTrace) Next(rec *Record) error {
	for t.s.Scan() {
		t.line++
		b := bytes.TrimSpace(t.s.Bytes())
		if len(b) == 0 {
			continue
		}
		var j jsonRecord
		if err := json.Unmarshal(b, &j); err != nil {
			return fmt.Errorf("sim: trace line %d: %w", t.line, err)
		}
		ts := strings.Trim(string(j.Timestamp), `"`)
		return fill(rec, t.line, ts, j.IP, j.User, j.APIKey, j.Tenant, j.Tier, j.Method, j.Route, j.Label)
	}
	if err := t.s.Err(); err != nil {
		return fmt.Errorf("sim: trace: %w", err)
	}
	return io.EOF
}

// NewAccessLogReader reads the common or combined access-log format
// (`host ident authuser [10/Oct/2000:13:55:36 -0700] "GET /path HTTP/1.1"
// status bytes ...`): the host is the IP, authuser ("-" for none) the
// user, the path without its query the route. Such logs carry no labels.
func NewAccessLogReader(r io.Reader) TraceReader {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 1<<16), 1<<20)
	return &accessLog{s: s}
}

type accessLog struct {
	s    *bufio.Scanner
	line int
}

var errAccessLine = errors.New("not a common or combined log line")

func (t *accessLog) Next(rec *Record) error {
	for t.s.Scan() {
		t.line++
		l := t.s.Text()
		if strings.TrimSpace(l) == "" {
			continue
		}
		if err := parseAccessLine(l, rec); err != nil {
			return fmt.Errorf("sim: trace line %d: %w", t.line, err)
		}
		return nil
	}
	if err := t.s.Err(); err != nil {
		return fmt.Errorf("sim: trace: %w", err)
	}
	return io.EOF
}

func parseAccessLine(l string, rec *Record) error {
	host, rest, ok := strings.Cut(l, " ")
	if !ok {
		return errAccessLine
	}
	_, rest, _ = strings.Cut(rest, " ") // ident
	user, rest, ok := strings.Cut(rest, " ")
	if !ok || !strings.HasPrefix(rest, "[") {
		return errAccessLine
	}
	ts, rest, ok := strings.Cut(rest[1:], "] \"")
	if !ok {
		return errAccessLine
	}
	req, _, ok := strings.Cut(rest, "\"")
	if !ok {
		return errAccessLine
	}
	method, target, _ := strings.Cut(req, " ")
	target, _, _ = strings.Cut(target, " ")
	path, _, _ := strings.Cut(target, "?")
	t, err := time.Parse("02/Jan/2006:15:04:05 -0700", ts)
	if err != nil {
		return fmt.Errorf("bad time %q", ts)
	}
	*rec = Record{Time: t.UnixNano(), Method: method, Route: path}
	if user != "-" {
		rec.User = user
	}
	if rec.IP, err = netip.ParseAddr(host); err != nil {
		return fmt.Errorf("bad host %q", host)
	}
	if method == "" || path == "" {
		return errAccessLine
	}
	return nil
}

// WriteCSVRecord appends rec to w as one CSV trace row (after CSVHeader).
func WriteCSVRecord(w *bufio.Writer, rec *Record) error {
	b := w.AvailableBuffer()
	b = strconv.AppendFloat(b, float64(rec.Time)/1e9, 'f', 3, 64)
	b = append(b, ',')
	if rec.IP.IsValid() {
		b = rec.IP.AppendTo(b)
	}
	for _, f := range []string{rec.User, rec.APIKey, rec.Tenant, rec.Tier, rec.Method, rec.Route, rec.Label.String()} {
		b = append(append(b, ','), f...) // generated fields hold no comma or quote
	}
	b = append(b, '\n')
	_, err := w.Write(b)
	return err
}
