package main

import (
	"bufio"
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/fingerprint"
	"github.com/sluicehq/sluice/sim"
)

// The self-test's populations, in virtual time.
const (
	playFor      = 6 * time.Minute
	firstMinute  = time.Minute // the botnet's figures count after it
	directUsers  = 30          // legitimate users, an address each
	cgnatUsers   = 10          // legitimate users behind one CGNAT address
	userPause    = 6 * time.Second
	newcomers    = 20 // legitimate users who first come during and after the flood
	scraperPause = time.Second
	botIPs       = 120
	botAccounts  = 200
	botPause     = 250 * time.Millisecond
	floodKeys    = 2000 // one request from each of as many /64s of one /48
	floodFrom    = 2 * time.Minute
	floodPause   = 15 * time.Millisecond
)

// population is who sent a request.
type population uint8

const (
	legit population = iota
	newcomer
	scraper
	botnet
	flood
)

// visit is one request of the play, at a virtual time.
type visit struct {
	at      time.Duration
	who     population
	client  *http.Client // its TLS fingerprint
	ip      string       // X-Forwarded-For
	agent   string
	apiKey  string
	path    string
	form    url.Values // a POST when set
	counted bool       // for the botnet: after its first minute
}

// result is what the self-test saw.
type result struct {
	legitRequests, legitRejected   int
	botnetRequests, botnetAdmitted int // after the botnet's first minute
	scraperAdmitted                int
	// newcomerRequests were sent by users first seen once the flood had
	// filled the table; newcomerOverLimit of them were answered 429 (the
	// target: none), newcomerShed 503 (a full table is the server's
	// condition).
	newcomerRequests, newcomerOverLimit, newcomerShed int
	tightened, early                                  uint64 // early: warnings the hook got
	overflowed                                        uint64 // api-ip decisions of keys that did not fit its table
	hotKeys, penalized                                int    // rows of the status page's report at the end
}

// selfTest serves the service over TLS on 127.0.0.1:0, on a clock of its
// own, and plays six virtual minutes against it, one request at a time in
// the order of their virtual times, each population over a TLS connection
// of its own (so each has its JA4) naming its client address in
// X-Forwarded-For, which the server trusts from 127.0.0.1 (the self-test's
// clients stand for the proxy and the clients behind it):
//
//   - legitimate users: 30 with an address each and 10 behind one CGNAT
//     address (100.64.1.1), each with a stable User-Agent and an API key,
//     logging in once (one in ten mistypes first) and then calling the API
//     at random times, six seconds apart on average;
//   - a scraper: one address, a request every second on the dot, a new
//     User-Agent each time, no API key;
//   - a credential-stuffing botnet: 120 addresses, one TLS client (one
//     JA4), one User-Agent, trying 200 leaked accounts in turn, four
//     attempts a second;
//   - a key flood: from minute 2, 2,000 requests in 30 s, each from
//     another /64 of 2001:db8:f100::/48, filling the API's per-IP table;
//   - newcomers: 20 legitimate users who first come from 20 s into the
//     flood on, when the table is full (a login and five API calls each).
//
// It prints one line:
//
//	abuse: legit_requests= legit_rejected= botnet_requests= botnet_admitted= scraper_admitted= flood_newcomer_rejected= tightened=
//
// legit_* count the legitimate users' requests and those sluice rejected
// (429 or 503); botnet_* the botnet's attempts after its first minute and
// those that reached the password check; scraper_admitted the scraper's
// requests answered; flood_newcomer_rejected the newcomers' requests
// answered 429 or 503 while the flood holds the table (their addresses
// are decided on their network prefix, which the flood's /48 does not
// spend); tightened the decisions made on tightened limits
// (Stats.Tightened). It returns an error, after the line, when a target is
// missed: a legitimate false-positive rate of 0.1% or more, the botnet
// admitted to more than 5% of its attempts after its first minute, a
// newcomer answered 429, newcomers rejected at 0.1% or more, or a flood
// that never filled the table (which would make the newcomers' figure say
// nothing).
//
// When trace is not nil, the play is written to it as a CSV trace
// (sim.CSVHeader; the legitimate users and newcomers labelled legit, the
// others abusive), for sluice-sim replay through policy.json.
func selfTest(out, trace io.Writer) (result, error) {
	var now atomic.Int64
	const start = int64(24 * time.Hour) // windows start at it, as in a replay
	now.Store(start)
	svc, err := newService(config{now: now.Load, log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return result{}, err
	}
	srv, err := serveTLS(svc)
	if err != nil {
		return result{}, err
	}
	defer srv.close()
	plan := play(srv)
	if trace != nil {
		if err := writeTrace(trace, plan); err != nil {
			return result{}, err
		}
	}

	var res result
	for _, v := range plan {
		now.Store(start + int64(v.at))
		status, err := srv.send(v)
		if err != nil {
			return res, fmt.Errorf("abuse: %s at %v: %w", v.path, v.at, err)
		}
		rejected := status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
		switch v.who {
		case legit:
			res.legitRequests++
			if rejected {
				res.legitRejected++
			}
		case newcomer:
			res.newcomerRequests++
			switch status {
			case http.StatusTooManyRequests:
				res.newcomerOverLimit++
			case http.StatusServiceUnavailable:
				res.newcomerShed++
			}
		case scraper:
			if !rejected {
				res.scraperAdmitted++
			}
		case botnet:
			if v.counted {
				res.botnetRequests++
				if !rejected {
					res.botnetAdmitted++
				}
			}
		}
	}
	st := svc.sluice.Stats()
	res.tightened, res.early = st.Tightened, uint64(svc.early.Load())
	for _, r := range st.Rules {
		if r.Name == "api-ip" {
			res.overflowed = r.Overflowed
		}
	}
	rep := svc.page.Report()
	res.hotKeys, res.penalized = len(rep.HotKeys), len(rep.Penalized)

	fmt.Fprintf(out, "abuse: legit_requests=%d legit_rejected=%d botnet_requests=%d botnet_admitted=%d scraper_admitted=%d flood_newcomer_rejected=%d tightened=%d\n",
		res.legitRequests, res.legitRejected, res.botnetRequests, res.botnetAdmitted, res.scraperAdmitted, res.newcomerOverLimit+res.newcomerShed, res.tightened)
	var missed []error
	if res.legitRequests == 0 || res.legitRejected*1000 >= res.legitRequests {
		missed = append(missed, fmt.Errorf("legitimate false positives %d of %d: not under 0.1%%", res.legitRejected, res.legitRequests))
	}
	if res.botnetRequests == 0 || res.botnetAdmitted*20 > res.botnetRequests {
		missed = append(missed, fmt.Errorf("botnet admitted %d of %d after its first minute: more than 5%%", res.botnetAdmitted, res.botnetRequests))
	}
	if res.newcomerOverLimit > 0 {
		missed = append(missed, fmt.Errorf("%d newcomer requests answered 429 during the flood", res.newcomerOverLimit))
	}
	if n := res.newcomerOverLimit + res.newcomerShed; res.newcomerRequests == 0 || n*1000 >= res.newcomerRequests {
		missed = append(missed, fmt.Errorf("newcomers rejected %d of %d during the flood: not under 0.1%%", n, res.newcomerRequests))
	}
	if res.overflowed == 0 {
		missed = append(missed, errors.New("the flood never filled the per-IP table"))
	}
	if err := errors.Join(missed...); err != nil {
		return res, fmt.Errorf("abuse: target missed: %w", err)
	}
	return res, nil
}

// play returns the self-test's requests, in the order of their virtual
// times (the same every run: a fixed seed).
func play(srv *tlsLoopback) []visit {
	rng := rand.New(rand.NewPCG(14, 17))
	var plan []visit
	jitter := func(d time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(d))) }
	// A user logs in (one in ten mistypes first), then calls the API at
	// random times, exponentially spaced (about userPause apart).
	user := func(who population, id int, ip string, from, until time.Duration, calls int) {
		name := fmt.Sprintf("user-%d", id)
		agent := fmt.Sprintf("Mozilla/5.0 (X11; Linux x86_64; rv:%d.0) Gecko/20100101 Firefox/%d.0", 120+id%9, 120+id%9)
		base := visit{who: who, client: srv.browser, ip: ip, agent: agent}
		t := from + jitter(30*time.Second)
		if rng.IntN(10) == 0 {
			v := base
			v.at, v.path, v.form = t, "/login", url.Values{"user": {name}, "password": {"typo"}}
			plan = append(plan, v)
			t += 2*time.Second + jitter(3*time.Second)
		}
		v := base
		v.at, v.path, v.form = t, "/login", url.Values{"user": {name}, "password": {password(name)}}
		plan = append(plan, v)
		for n := 0; calls == 0 || n < calls; n++ {
			t += time.Duration(rng.ExpFloat64() * float64(userPause))
			if t >= until {
				break
			}
			v := base
			v.at, v.apiKey, v.path = t, "key-"+name, fmt.Sprintf("/api/items?page=%d", rng.IntN(50))
			plan = append(plan, v)
		}
	}
	for i := range directUsers {
		user(legit, i, fmt.Sprintf("198.51.100.%d", i+1), 0, playFor, 0)
	}
	for i := range cgnatUsers {
		user(legit, directUsers+i, "100.64.1.1", 0, playFor, 0)
	}
	for i := range newcomers {
		from := floodFrom + 20*time.Second + jitter(2*time.Minute) // the table is full by then
		user(newcomer, 100+i, fmt.Sprintf("198.51.100.%d", 101+i), from, playFor, 5)
	}
	for i, t := 0, 10*time.Second; t < playFor; i, t = i+1, t+scraperPause {
		plan = append(plan, visit{at: t, who: scraper, client: srv.tool, ip: "203.0.113.50",
			agent: fmt.Sprintf("Mozilla/5.0 (compatible; Crawler/%d.%d)", i%25, i%7), path: fmt.Sprintf("/api/items?page=%d", i)})
	}
	for i, t := 0, time.Duration(0); t < playFor; i, t = i+1, t+botPause {
		account := fmt.Sprintf("leaked-%03d", i%botAccounts)
		plan = append(plan, visit{at: t, who: botnet, client: srv.bot, ip: fmt.Sprintf("192.0.2.%d", 1+rng.IntN(botIPs)),
			agent: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36",
			path:  "/login", form: url.Values{"user": {account}, "password": {"Summer2024!"}}, counted: t >= firstMinute})
	}
	for i := range floodKeys {
		plan = append(plan, visit{at: floodFrom + time.Duration(i)*floodPause, who: flood, client: srv.tool,
			ip: fmt.Sprintf("2001:db8:f100:%x::1", i), agent: "curl/8.5.0", path: "/api/items"})
	}
	slices.SortStableFunc(plan, func(a, b visit) int { return cmp.Compare(a.at, b.at) })
	return plan
}

// traceStart is the wall time the trace puts the play's start at, in Unix
// seconds: 2026-01-05 09:00 UTC.
const traceStart = 1_767_603_600

// writeTrace writes plan as a CSV trace (sim.CSVHeader): what a server's
// access log holds, and what sim.Replay reads. It has no User-Agent and no
// TLS fingerprint, so a replay does not tighten anyone.
func writeTrace(w io.Writer, plan []visit) error {
	bw := bufio.NewWriter(w)
	bw.WriteString(sim.CSVHeader + "\n")
	for _, v := range plan {
		method, user := http.MethodGet, ""
		if v.form != nil {
			method, user = http.MethodPost, v.form.Get("user")
		}
		route, _, _ := strings.Cut(v.path, "?")
		label := "abusive"
		if v.who == legit || v.who == newcomer {
			label = "legit"
		}
		t := time.Unix(traceStart, 0).Add(v.at)
		fmt.Fprintf(bw, "%d.%09d,%s,%s,%s,,,%s,%s,%s\n", t.Unix(), t.Nanosecond(), v.ip, user, v.apiKey, method, route, label)
	}
	return bw.Flush()
}

// tlsLoopback is the service served over TLS on 127.0.0.1:0, the way a
// deployment terminates TLS in the process (fingerprint.ConnContext and
// CaptureTLS), and three clients of it whose TLS handshakes differ, so
// that each has its own JA4: a browser-like one (HTTP/2), a tool (HTTP/1.1
// only) and the botnet's (TLS 1.2 with a short cipher list).
type tlsLoopback struct {
	url                string
	srv                *http.Server
	browser, tool, bot *http.Client
}

func serveTLS(svc *service) (*tlsLoopback, error) {
	cfg, err := svc.serverTLS()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &tlsLoopback{url: "https://" + ln.Addr().String(),
		srv: &http.Server{Handler: svc.handler, TLSConfig: cfg, ConnContext: fingerprint.ConnContext, ReadHeaderTimeout: 5 * time.Second}}
	roots := x509.NewCertPool()
	roots.AddCert(svc.cert.Leaf)
	client := func(tc *tls.Config, h2 bool) *http.Client {
		tc.RootCAs = roots
		return &http.Client{Timeout: 10 * time.Second,
			Transport: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: h2, MaxIdleConnsPerHost: 2}}
	}
	l.browser = client(&tls.Config{}, true)
	l.tool = client(&tls.Config{}, false)
	l.bot = client(&tls.Config{MaxVersion: tls.VersionTLS12,
		CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305}}, false)
	go l.srv.ServeTLS(ln, "", "") // returns ErrServerClosed at close
	return l, nil
}

// send sends v and returns the status of its response, read whole.
func (l *tlsLoopback) send(v visit) (int, error) {
	method, body := http.MethodGet, io.Reader(nil)
	if v.form != nil {
		method, body = http.MethodPost, strings.NewReader(v.form.Encode())
	}
	req, err := http.NewRequest(method, l.url+v.path, body)
	if err != nil {
		return 0, err
	}
	if v.form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("X-Forwarded-For", v.ip)
	req.Header.Set("User-Agent", v.agent)
	if v.apiKey != "" {
		req.Header.Set("X-API-Key", v.apiKey)
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, err
}

// close stops the server and closes the clients' idle connections, so that
// no goroutine of either is left.
func (l *tlsLoopback) close() {
	l.srv.Close()
	for _, c := range []*http.Client{l.browser, l.tool, l.bot} {
		c.CloseIdleConnections()
	}
}
