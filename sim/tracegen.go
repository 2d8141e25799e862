package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"time"
)

// TraceSpec describes a synthetic trace: legitimate users (Poisson, with
// a daily cycle), a few heavy but legitimate automation clients, a
// credential-stuffing botnet that rotates IPs, and a scraper behind a
// carrier-grade NAT address shared with some legitimate users. Rates are
// per minute; zero counts leave a population out.
type TraceSpec struct {
	Seed     uint64
	Start    time.Time
	Duration time.Duration

	// Users are legitimate users, each with its own IP (CGNATUsers of
	// them share the scraper's address) and user id "user-N", tier "free"
	// or (one in five) "pro". Each sends UserRate requests a minute on
	// average, modulated by 1 + Diurnal·sin(2π·t/24h) (Diurnal in [0, 1)):
	// reads (GET /api/items), WriteShare of them writes (POST /api/items),
	// LoginShare logins (POST /login).
	Users                            int
	UserRate, Diurnal                float64
	WriteShare, LoginShare           float64
	CGNATUsers                       int
	Automation                       int     // clients with API key "auto-N", tier "automation"
	AutomationRate                   float64 // reads a minute, each
	BotnetIPs                        int     // addresses the botnet rotates through
	BotnetRate                       float64 // login attempts a minute, all addresses together
	BotnetPerIP                      int     // attempts from one address before it rotates
	BotnetTargets                    int     // accounts "victim-N" the botnet tries (default 100)
	ScraperRate                      float64 // reads a minute from the CGNAT address
	ScraperRoute, ScraperCGNATPrefix string  // defaults "/api/items", "100.64.0.1"
}

// validate checks the spec's values.
func (s *TraceSpec) validate() error {
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) || v < 0 }
	switch {
	case s.Duration <= 0:
		return errors.New("sim: trace duration must be positive")
	case s.Users < 0 || s.Automation < 0 || s.BotnetIPs < 0 || s.CGNATUsers < 0 || s.CGNATUsers > s.Users ||
		s.BotnetTargets < 0:
		return errors.New("sim: trace populations must be non-negative (CGNATUsers at most Users)")
	case bad(s.UserRate) || bad(s.AutomationRate) || bad(s.BotnetRate) || bad(s.ScraperRate):
		return errors.New("sim: trace rates must be finite and non-negative")
	case bad(s.Diurnal) || s.Diurnal >= 1:
		return errors.New("sim: diurnal amplitude must be in [0, 1)")
	case bad(s.WriteShare) || bad(s.LoginShare) || s.WriteShare+s.LoginShare > 1:
		return errors.New("sim: write and login shares must be in [0, 1] together")
	case s.BotnetRate > 0 && (s.BotnetIPs == 0 || s.BotnetPerIP <= 0):
		return errors.New("sim: a botnet needs addresses and attempts per address")
	}
	return nil
}

// source is one client population member: its next request time and how
// it makes requests.
type source struct {
	next int64 // ns from the start
	kind uint8
	id   int
	rng  *rand.Rand
	rate float64 // peak events per ns (thinning bound)
	n    int     // requests made (botnet rotation)
}

const (
	srcUser = iota
	srcAuto
	srcBot
	srcScraper
)

type sourceHeap []*source

func (h sourceHeap) Len() int           { return len(h) }
func (h sourceHeap) Less(i, j int) bool { return h[i].next < h[j].next }
func (h sourceHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *sourceHeap) Push(x any)        { *h = append(*h, x.(*source)) }
func (h *sourceHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Generator produces a TraceSpec's records in time order (a TraceReader).
type Generator struct {
	spec    TraceSpec
	h       sourceHeap
	start   int64
	end     int64
	cgnat   netip.Addr
	names   []string // user ids, made once
	victims []string // the botnet's target accounts
}

// NewGenerator returns a Generator for spec; the same spec gives the same
// records.
func NewGenerator(spec TraceSpec) (*Generator, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if spec.ScraperRoute == "" {
		spec.ScraperRoute = "/api/items"
	}
	if spec.ScraperCGNATPrefix == "" {
		spec.ScraperCGNATPrefix = "100.64.0.1"
	}
	cgnat, err := netip.ParseAddr(spec.ScraperCGNATPrefix)
	if err != nil {
		return nil, fmt.Errorf("sim: scraper address: %w", err)
	}
	g := &Generator{spec: spec, start: spec.Start.UnixNano(), end: int64(spec.Duration), cgnat: cgnat}
	perNs := func(perMin float64) float64 { return perMin / float64(time.Minute) }
	add := func(kind uint8, id int, rate float64) {
		if rate <= 0 {
			return
		}
		s := &source{kind: kind, id: id, rate: rate,
			rng: rand.New(rand.NewPCG(spec.Seed, uint64(kind)<<32|uint64(id)))}
		g.advance(s)
		heap.Push(&g.h, s)
	}
	if spec.BotnetTargets == 0 {
		spec.BotnetTargets = 100
	}
	for i := range spec.BotnetTargets {
		g.victims = append(g.victims, "victim-"+strconv.Itoa(i))
	}
	g.spec = spec
	g.names = make([]string, spec.Users)
	for i := range spec.Users {
		g.names[i] = "user-" + strconv.Itoa(i)
		add(srcUser, i, perNs(spec.UserRate)*(1+spec.Diurnal))
	}
	for i := range spec.Automation {
		add(srcAuto, i, perNs(spec.AutomationRate))
	}
	add(srcBot, 0, perNs(spec.BotnetRate))
	add(srcScraper, 0, perNs(spec.ScraperRate))
	return g, nil
}

// advance moves s to its next event: exponential gaps at its peak rate,
// thinned to the daily cycle for users.
func (g *Generator) advance(s *source) {
	for {
		s.next += int64(s.rng.ExpFloat64() / s.rate)
		if s.kind != srcUser || g.spec.Diurnal == 0 {
			return
		}
		phase := 2 * math.Pi * float64(s.next) / float64(24*time.Hour)
		if s.rng.Float64()*(1+g.spec.Diurnal) < 1+g.spec.Diurnal*math.Sin(phase) {
			return
		}
	}
}

// Next writes the next record to rec; io.EOF after the trace's end.
func (g *Generator) Next(rec *Record) error {
	if len(g.h) == 0 || g.h[0].next >= g.end {
		return io.EOF
	}
	s := g.h[0]
	*rec = Record{Time: g.start + s.next, Label: Legit}
	switch s.kind {
	case srcUser:
		rec.User = g.names[s.id]
		rec.Tier = "free"
		if s.id%5 == 0 {
			rec.Tier = "pro"
		}
		if s.id < g.spec.CGNATUsers {
			rec.IP = g.cgnat
		} else {
			rec.IP = netip.AddrFrom4([4]byte{10, byte(s.id >> 16), byte(s.id >> 8), byte(s.id)})
		}
		rec.Method, rec.Route = "GET", "/api/items"
		switch u := s.rng.Float64(); {
		case u < g.spec.LoginShare:
			rec.Method, rec.Route = "POST", "/login"
		case u < g.spec.LoginShare+g.spec.WriteShare:
			rec.Method = "POST"
		}
	case srcAuto:
		rec.APIKey, rec.Tier = "auto-"+strconv.Itoa(s.id), "automation"
		rec.IP = netip.AddrFrom4([4]byte{10, 200, byte(s.id >> 8), byte(s.id)})
		rec.Method, rec.Route = "GET", "/api/items"
	case srcBot:
		ip := (s.n / g.spec.BotnetPerIP) % g.spec.BotnetIPs
		rec.IP = netip.AddrFrom4([4]byte{203, byte(ip >> 16), byte(ip >> 8), byte(ip)})
		rec.User = g.victims[s.rng.IntN(len(g.victims))]
		rec.Method, rec.Route, rec.Label = "POST", "/login", Abusive
		s.n++
	case srcScraper:
		rec.IP, rec.Method, rec.Route, rec.Label = g.cgnat, "GET", g.spec.ScraperRoute, Abusive
	}
	g.advance(s)
	heap.Fix(&g.h, 0)
	return nil
}
