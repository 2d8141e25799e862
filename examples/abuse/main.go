// Command abuse defends a public API and its login end to end: behind a
// trusted proxy (X-Forwarded-For is read only from 127.0.0.1), over TLS
// with each connection's JA4 fingerprint captured, it limits per client IP
// (CGNAT addresses get ten times the limit), per API key and per account,
// under a global cap; it tightens the limits of clients whose behaviour
// looks automated (rotating User-Agents, clockwork timing, a JA4 whose
// logins keep failing) and escalates penalties for those who keep going;
// a flood of new keys from one IPv6 /48 fills the per-IP table, and what
// does not fit is decided on its network prefix, so the flood spends only
// its own /48 while newcomers from elsewhere are served (a spent prefix is
// the server's condition, 503, never a client's 429). It
// raises early warnings, has a dry-run switch, exports Prometheus metrics
// on /metrics and serves the live status page on /debug/sluice/.
//
//	go run ./examples/abuse                # serve on https://127.0.0.1:8443
//	go run ./examples/abuse -dry-run       # the same, rejecting nothing
//	go run ./examples/abuse -selftest      # play six minutes of traffic against itself
//	go run ./examples/abuse -selftest -trace play.csv && \
//	  go run ./cmd/sluice-sim replay -policy examples/abuse/policy.json play.csv
//
// The self-test plays, on a clock of its own (virtual time: six minutes
// in a few seconds), legitimate users, a scraper, a credential-stuffing
// botnet and a key flood over loopback TLS, and prints one line (see
// selfTest).
package main

import (
	"crypto/tls"
	_ "embed"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/examples/internal/demo"
	"github.com/sluicehq/sluice/fingerprint"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/promshed"
	"github.com/sluicehq/sluice/shed/statuspage"
)

func main() {
	dryRun := flag.Bool("dry-run", false, "count and log what would be rejected, reject nothing")
	trace := flag.String("trace", "", "with -selftest: write the play as a CSV trace to this file, for sluice-sim replay")
	var tlsCfg *tls.Config
	demo.Command{
		Addr:   "127.0.0.1:8443",
		Drives: "play legitimate users, a scraper, a credential-stuffing botnet and a key flood against itself",
		SelfTest: func(out io.Writer) error {
			var tr io.Writer
			if *trace != "" {
				f, err := os.Create(*trace)
				if err != nil {
					return err
				}
				defer f.Close()
				tr = f
			}
			_, err := selfTest(out, tr)
			return err
		},
		Serve: func(out io.Writer, addr string) (http.Handler, error) {
			svc, err := newService(config{dryRun: *dryRun, log: slog.New(slog.NewTextHandler(os.Stderr, nil))})
			if err != nil {
				return nil, err
			}
			if tlsCfg, err = svc.serverTLS(); err != nil {
				return nil, err
			}
			fmt.Fprintf(out, "API on https://%s/api/items (X-API-Key optional), login on https://%s/login, a self-signed certificate\n", addr, addr)
			fmt.Fprintf(out, "metrics on https://%s/metrics, status page on https://%s/debug/sluice/ (pardon and reset from this machine)\n", addr, addr)
			fmt.Fprintf(out, "requests from 127.0.0.1 come from the trusted proxy: name a client with X-Forwarded-For\n")
			fmt.Fprintf(out, "try: for i in $(seq 12); do curl -sk -o /dev/null -w '%%{http_code} ' -H 'X-Forwarded-For: 198.51.100.7' -d user=alice -d password=guess https://%s/login; done\n", addr)
			return svc.handler, nil
		},
		Configure: func(srv *http.Server) error {
			srv.TLSConfig = tlsCfg
			srv.ConnContext = fingerprint.ConnContext // each connection's JA4, for the suspicion score
			return nil
		},
	}.Main()
}

// policy is the example's limits, penalties and suspicion scale, as a
// policy file (package policy): sluice-sim replays a trace through the
// same file. A legitimate user sends a request every few seconds; the API
// allows an IP 300 requests in 5 minutes (ten times that for a CGNAT
// address), an API key a burst of 60 refilled at one a second, the whole
// API 1000 a second; a login 10 attempts per IP and 5 per account in 15
// minutes. The per-IP table of the API holds 1,024 keys: a flood of new
// keys fills it, and an address that does not fit is decided on its
// network prefix (a /24, a /48), at four times the per-IP limit for each
// prefix (503s when a prefix is spent: the server's condition, never a
// client's 429), so the flood's /48 does not lock out other networks.
// Clients
// scoring above 0.7 get a tenth of each per-key limit (one login per 15
// minutes); three rejections in 15 minutes put an IP in a timeout of 5
// minutes, then 15, then an hour.
//
//go:embed policy.json
var policyFile []byte

// A JA4 whose logins mostly fail is a signal (see reputation).
const (
	badJA4Logins  = 20  // logins of one JA4 before its failure share counts
	badJA4Failing = 0.8 // failure share that makes it a signal
)

// config is what differs between serving and the self-test.
type config struct {
	dryRun bool
	now    func() int64 // the self-test's clock (monotonic ns); nil: the real one
	log    *slog.Logger
}

// service is the API and login behind sluice, with its operator endpoints.
type service struct {
	handler http.Handler
	sluice  *shed.Controller
	page    *statuspage.Page
	rep     *reputation
	cert    tls.Certificate
	early   atomic.Int64 // early warnings raised
	// badJA4 is the signal of a client whose TLS fingerprint keeps
	// failing logins: enough on its own to tighten its limits.
	badJA4 []fingerprint.Signal
}

func newService(cfg config) (*service, error) {
	cert, err := selfSigned()
	if err != nil {
		return nil, err
	}
	svc := &service{rep: newReputation(), cert: cert, badJA4: []fingerprint.Signal{{Name: "ja4-failing-logins", Value: 0.9}}}
	pol, err := policy.Parse("policy.json", policyFile)
	if err != nil {
		return nil, err
	}
	res, err := fingerprint.NewResolver(fingerprint.WithTrustedProxies(
		netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")))
	if err != nil {
		return nil, err
	}
	// The policy's categories, rules, penalty box and suspicion scale, and
	// what only code can say: who the proxy is, who the client is, what
	// to do with an early warning.
	opts := []shed.Option{
		shed.WithLogger(cfg.log),
		shed.WithResolver(res),
		shed.WithClient(svc.client),
		shed.WithEarlyWarning(func(shed.EarlyWarning) { svc.early.Add(1) }), // shed logs them too
	}
	var pageOpts []statuspage.Option
	if cfg.now != nil {
		opts = append(opts, shed.WithClock(cfg.now))
		pageOpts = append(pageOpts, statuspage.WithClock(cfg.now))
	}
	if cfg.dryRun {
		opts = append(opts, shed.WithDryRun())
	}
	if svc.sluice, err = pol.New(opts...); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	if _, err := promshed.New(reg, svc.sluice); err != nil {
		return nil, err
	}
	// The page's actions (pardon, reset) are for an operator on this
	// machine: a request from loopback that no proxy forwarded.
	local := func(r *http.Request) bool {
		ap, err := netip.ParseAddrPort(r.RemoteAddr)
		return err == nil && ap.Addr().IsLoopback() && r.Header.Get("X-Forwarded-For") == ""
	}
	if svc.page, err = statuspage.New(svc.sluice, append(pageOpts, statuspage.WithActions(local))...); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /api/", svc.sluice.Middleware(http.HandlerFunc(items)))
	mux.Handle("POST /login", http.MaxBytesHandler(svc.sluice.Middleware(http.HandlerFunc(svc.login)), 4<<10))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/debug/sluice/", http.StripPrefix("/debug/sluice", svc.page))
	svc.handler = mux
	return svc, nil
}

// serverTLS is the server's TLS configuration, capturing each handshake's
// fingerprints (the server needs fingerprint.ConnContext as well).
func (s *service) serverTLS() (*tls.Config, error) {
	return fingerprint.CaptureTLS(&tls.Config{Certificates: []tls.Certificate{s.cert}, MinVersion: tls.VersionTLS12})
}

// client is the identity sluice sees: the API key, the account a login is
// for, and the caller's signal of a JA4 known to fail logins.
func (s *service) client(r *http.Request) shed.Client {
	c := shed.Client{APIKey: r.Header.Get("X-API-Key")}
	if r.URL.Path == "/login" {
		c.User = r.PostFormValue("user")
	}
	if fp, ok := fingerprint.TLSFromContext(r.Context()); ok && s.rep.bad(fp.JA4) {
		c.Signals = s.badJA4
	}
	return c
}

// items is the API: a stand-in page of items.
func items(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "items of %s\n", r.URL.Path)
}

// password is the password of an account the stand-in check knows (the
// "user-" accounts).
func password(user string) string { return "pw-" + user }

// login is the login endpoint: a stand-in password check that tells the
// reputation of the connection's JA4 how it went.
func (s *service) login(w http.ResponseWriter, r *http.Request) {
	user := r.PostFormValue("user")
	ok := strings.HasPrefix(user, "user-") && r.PostFormValue("password") == password(user)
	if fp, found := fingerprint.TLSFromContext(r.Context()); found {
		s.rep.record(fp.JA4, !ok)
	}
	if !ok {
		http.Error(w, "wrong user or password", http.StatusUnauthorized)
		return
	}
	fmt.Fprintf(w, "welcome, %s\n", user)
}

// reputation counts logins and failures per JA4: the application's own
// knowledge, which it hands to sluice as a caller signal (a fingerprint
// whose logins mostly fail is a credential-stuffing tool, whatever IP it
// comes from). It is bounded (maxJA4 fingerprints; later ones are not
// counted) and never forgets, which a real service would do with a
// window. Safe for concurrent use.
type reputation struct {
	mu    sync.Mutex
	byJA4 map[string]*logins
}

type logins struct{ attempts, failures int }

const maxJA4 = 4096

func newReputation() *reputation { return &reputation{byJA4: map[string]*logins{}} }

func (r *reputation) record(ja4 string, failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.byJA4[ja4]
	if l == nil {
		if len(r.byJA4) >= maxJA4 {
			return
		}
		l = &logins{}
		r.byJA4[ja4] = l
	}
	l.attempts++
	if failed {
		l.failures++
	}
}

// bad reports whether ja4's logins mostly fail.
func (r *reputation) bad(ja4 string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.byJA4[ja4]
	return l != nil && l.attempts >= badJA4Logins && float64(l.failures) >= badJA4Failing*float64(l.attempts)
}
