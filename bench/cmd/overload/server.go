package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/shed/connguard"
)

// serverConfig is what the server role serves.
type serverConfig struct {
	contender string
	static    int
	rounds    int64
	wait      time.Duration
	slots     int
	dropAt    time.Duration // when the work per request doubles; zero: never
	proto     string
	// h2Streams bounds the concurrent streams of an HTTP/2 connection;
	// zero means net/http's default (250).
	h2Streams int
	// guardConns is the guard contender's connection bound (0: its default).
	guardConns int
	sample     time.Duration
	// calibrateCPU, when positive, makes the role print "rounds N", the
	// sha256 rounds that take calibrateCPU of CPU here, and serve nothing.
	calibrateCPU time.Duration
	// cpuProfile, when set, is the file the phase's CPU profile goes to.
	cpuProfile string
}

// sample is one reading of the server's protection during the phase.
type sample struct {
	AtMS     float64 `json:"t_ms"`
	Limit    int     `json:"limit"` // -1: the contender has no limit
	Inflight int64   `json:"inflight"`
	// Shedding is the share sluice's controller sheds (Controller.Shedding);
	// zero for the other contenders.
	Shedding float64 `json:"shedding,omitempty"`
}

// serverStats is what the server reports at the end of the phase.
type serverStats struct {
	UserUS   int64 `json:"user_us"`
	SysUS    int64 `json:"sys_us"`
	Conns    int64 `json:"conns"`    // connections accepted during the phase
	Requests int64 `json:"requests"` // requests that reached the middleware, or the Guard's early answer
	// Worked counts the requests whose CPU work ran to its end: those the
	// contender let through to the endpoint (all of them for the I/O
	// endpoint, which has no CPU work).
	Worked     int64 `json:"worked"`
	GOMAXPROCS int   `json:"gomaxprocs"`
	// PhaseUS is the wall time between the two readings of the counters,
	// in µs: the window they cover, longer than asked when the end reading
	// runs late on an overloaded server.
	PhaseUS int64    `json:"phase_us"`
	Samples []sample `json:"samples"`
	// Guard is what the guard contender's Guard did during the phase; nil
	// for the other contenders.
	Guard *connguard.Stats `json:"guard,omitempty"`
}

func cpuNow() (user, sys int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return ru.Utime.Nano() / 1e3, ru.Stime.Nano() / 1e3
}

// protocols returns the HTTP versions of proto: "1" (HTTP/1.1 only) or
// "h2c" (HTTP/2 without TLS, prior knowledge).
func protocols(proto string) (*http.Protocols, error) {
	var p http.Protocols
	switch proto {
	case "1":
		p.SetHTTP1(true)
	case "h2c":
		p.SetUnencryptedHTTP2(true)
	default:
		return nil, fmt.Errorf("overload: unknown HTTP version %q (want 1 or h2c)", proto)
	}
	return &p, nil
}

// serve runs the server role: it prints "ready ADDR", and on a "begin D"
// or "begin D F" line from in measures the phase of length D (from F ns on
// when F is given) and prints "stats JSON". It returns when in ends.
func serve(cfg serverConfig, in io.Reader, out io.Writer) error {
	if cfg.calibrateCPU > 0 {
		_, err := fmt.Fprintf(out, "rounds %d\n", calibrateRounds(cfg.calibrateCPU))
		return err
	}
	ep, err := newEndpoint(cfg.rounds, cfg.wait, cfg.slots)
	if err != nil {
		return err
	}
	prot, err := newProtection(cfg.contender, protectionConfig{static: cfg.static, proto: cfg.proto, guardConns: cfg.guardConns})
	if err != nil {
		return err
	}
	defer prot.close()
	var inflight, requests, conns atomic.Int64
	handler := counted(prot.wrap(ep), &requests, &inflight)
	srv, ln, err := newServer(prot, handler, cfg.proto, cfg.h2Streams, &conns)
	if err != nil {
		return err
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	fmt.Fprintf(out, "ready %s\n", ln.Addr())

	sc := bufio.NewScanner(in)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "begin ")
		if !ok {
			continue
		}
		d, f, _ := strings.Cut(rest, " ")
		ns, err := strconv.ParseInt(d, 10, 64)
		var from int64
		if err == nil && f != "" {
			from, err = strconv.ParseInt(f, 10, 64)
		}
		if err != nil || ns <= 0 || from < 0 || from >= ns {
			return fmt.Errorf("overload: bad begin line %q", sc.Text())
		}
		phase(cfg, time.Duration(ns), time.Duration(from), ep, prot, &inflight, &requests, &conns, out)
	}
	return sc.Err()
}

// counted returns h behind the server's counters: requests counts every
// request that reaches the handler chain, inflight those in it now.
func counted(h http.Handler, requests, inflight *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		inflight.Add(1)
		defer inflight.Add(-1)
		h.ServeHTTP(w, r)
	})
}

// phase measures one phase of length d: the limit and inflight every
// cfg.sample, and from from on (zero: from its start) the process's CPU
// time, the requests and the connections accepted, and prints them as one
// "stats" line when d has passed. It does not block.
func phase(cfg serverConfig, d, from time.Duration, ep *endpoint, prot *protection, inflight, requests, conns *atomic.Int64, out io.Writer) {
	t0 := time.Now()
	var prof *os.File
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			prof = f
		}
	}
	// What the counters read at from; the end reads them after marked.
	var (
		u0, s0, r0, c0, w0 int64
		t1                 time.Time
		g0                 connguard.Stats
		marked             = make(chan struct{})
	)
	mark := func() {
		t1 = time.Now()
		u0, s0 = cpuNow()
		r0, c0, w0 = requests.Load(), conns.Load(), ep.worked.Load()
		if prot.guard != nil {
			g0 = prot.guard.Stats()
		}
		close(marked)
	}
	if from > 0 {
		time.AfterFunc(from, mark)
	} else {
		mark()
	}
	if cfg.dropAt > 0 {
		time.AfterFunc(cfg.dropAt, ep.double)
	}
	n := min(10_000, int(d/cfg.sample)+1)
	samples := make([]sample, 0, n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(cfg.sample)
		defer t.Stop()
		for len(samples) < n {
			at := time.Since(t0)
			if at > d {
				return
			}
			s := sample{AtMS: float64(at) / 1e6, Limit: -1, Inflight: inflight.Load()}
			if prot.limit != nil {
				s.Limit = prot.limit()
			}
			if prot.ctl != nil {
				s.Shedding = prot.ctl.Shedding()
			}
			samples = append(samples, s)
			<-t.C
		}
	}()
	time.AfterFunc(d, func() {
		<-marked
		u1, s1 := cpuNow()
		window := time.Since(t1)
		if prof != nil {
			pprof.StopCPUProfile()
			_ = prof.Close()
		}
		st := serverStats{
			UserUS: u1 - u0, SysUS: s1 - s0,
			Conns: conns.Load() - c0, Requests: requests.Load() - r0, Worked: ep.worked.Load() - w0,
			GOMAXPROCS: runtime.GOMAXPROCS(0), PhaseUS: window.Microseconds(),
		}
		if prot.guard != nil {
			g := guardDelta(g0, prot.guard.Stats())
			st.Guard = &g
			st.Requests += int64(g.EarlyAnswers) // answered without the middleware
		}
		<-done
		st.Samples = samples
		b, _ := json.Marshal(st)
		fmt.Fprintf(out, "stats %s\n", b)
	})
}

// newServer returns the server of proto for handler behind prot, counting
// the connections it accepts in conns, and its listener on a free loopback
// port, behind prot's listener wrapper when it has one.
func newServer(prot *protection, handler http.Handler, proto string, h2Streams int, conns *atomic.Int64) (*http.Server, net.Listener, error) {
	protos, err := protocols(proto)
	if err != nil {
		return nil, nil, err
	}
	// The server accepts HTTP/1.1 too, so that the h2c client's fallback
	// could not hide a failure to speak HTTP/2: the client allows h2c only.
	protos.SetHTTP1(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	srv := &http.Server{
		Handler:           handler,
		Protocols:         protos,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnState: func(c net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
			if prot.connState != nil {
				prot.connState(c, s)
			}
		},
	}
	if prot.connContext != nil {
		srv.ConnContext = prot.connContext
	}
	if prot.listen != nil {
		ln = prot.listen(ln)
	}
	if h2Streams > 0 {
		srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: h2Streams}
	}
	return srv, ln, nil
}

// guardDelta is what a Guard counted between two snapshots; Open is that
// of the later one.
func guardDelta(a, b connguard.Stats) connguard.Stats {
	return connguard.Stats{
		Accepted: b.Accepted - a.Accepted, Open: b.Open,
		Shed: b.Shed - a.Shed, Full: b.Full - a.Full, IdleClosed: b.IdleClosed - a.IdleClosed,
		Unanswered: b.Unanswered - a.Unanswered, WriteErrors: b.WriteErrors - a.WriteErrors,
		IdleShed: b.IdleShed - a.IdleShed, Pauses: b.Pauses - a.Pauses, Paused: b.Paused - a.Paused,
		EarlyAnswers: b.EarlyAnswers - a.EarlyAnswers,
	}
}
