package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/examples/internal/demo"
)

// The self-test's targets.
const (
	maxFairRatio       = 2    // quiet tenant's p99 beside the noisy one, over its p99 alone
	minCriticalGoodput = 0.99 // critical requests served under batch overload
)

// The self-test's load: how long each scene runs, and its clients, each
// sending request after request.
const (
	sceneFor        = 1500 * time.Millisecond
	quietClients    = 4  // 2000 tokens in flight at most: under its share of 2500
	noisyClients    = 50 // 10x its share of upstreamTokens/2
	criticalClients = 4
	batchClients    = 80 // with the critical ones, 8.4x the model's capacity: waits in turn would pass MaxWait
	testBudget      = 20_000
)

// result is what the self-test measured.
type result struct {
	// used is how many tokens the metered tenant's served requests used,
	// and overspend by how many that is more than its budget (0 when it
	// is less).
	used, overspend int64
	// quietAlone and quietLoaded are the quiet tenant's p99 alone and
	// beside the noisy tenant; ratio is loaded over alone.
	quietAlone, quietLoaded time.Duration
	ratio                   float64
	// quietRefused counts the quiet tenant's requests not served beside
	// the noisy one.
	quietRefused int
	// criticalGoodput is the share of critical requests served under the
	// batch overload; batchServed and batchAsked the batch ones.
	criticalGoodput         float64
	batchServed, batchAsked int
	// lockedOut reports that alice could not log in with her password
	// after four wrong guesses; fifthLimited that the guess after her
	// fifth failure was refused (429).
	lockedOut, fifthLimited bool
}

// selfTest runs four scenes, each on a fresh gateway on 127.0.0.1:0, and
// prints the one line that sums them up:
//
//  1. budget: a tenant with a budget of testBudget tokens sends from 8
//     clients until refused; every completion uses 300 to 700 tokens on an
//     estimate of 500;
//  2. fair share: a quiet tenant's latency alone on one gateway and,
//     at the same time, beside a noisy tenant at 10x its share of the model
//     on another;
//  3. priorities: critical requests beside a flood of batch ones;
//  4. login: alice guesses wrong four times, logs in, logs in again, then
//     fails twice more.
//
// It returns an error, after the line, when a target is missed:
// overspend above overspendAllowance, a fair-share ratio above 2, a quiet
// request refused, critical goodput under 0.99, alice locked out, or the
// login rule not limiting at all.
func selfTest(out io.Writer) (result, error) {
	var res result
	var err error
	if res.used, err = budgetScene(); err != nil {
		return res, err
	}
	res.overspend = max(0, res.used-testBudget)
	if res.quietAlone, res.quietLoaded, res.quietRefused, err = fairScene(); err != nil {
		return res, err
	}
	res.ratio = float64(res.quietLoaded) / float64(res.quietAlone)
	if res.criticalGoodput, res.batchServed, res.batchAsked, err = priorityScene(); err != nil {
		return res, err
	}
	if res.lockedOut, res.fifthLimited, err = loginScene(); err != nil {
		return res, err
	}
	fmt.Fprintf(out, "llmgateway: budget_overspend=%d fair_p99_ratio=%.2f critical_goodput=%.3f login_locked_out_after_success=%v\n",
		res.overspend, res.ratio, res.criticalGoodput, res.lockedOut)
	var missed []error
	if res.overspend > overspendAllowance {
		missed = append(missed, fmt.Errorf("budget overspent by %d tokens, more than the in-flight allowance %d", res.overspend, overspendAllowance))
	}
	if res.ratio > maxFairRatio || res.quietRefused > 0 {
		missed = append(missed, fmt.Errorf("the quiet tenant's p99 went from %v to %v (ratio %.2f, at most %v), %d refused",
			res.quietAlone, res.quietLoaded, res.ratio, maxFairRatio, res.quietRefused))
	}
	if res.criticalGoodput < minCriticalGoodput {
		missed = append(missed, fmt.Errorf("critical goodput %.3f, under %v", res.criticalGoodput, minCriticalGoodput))
	}
	if res.lockedOut || !res.fifthLimited {
		missed = append(missed, fmt.Errorf("login: locked out after success %v, fifth failure limited %v", res.lockedOut, res.fifthLimited))
	}
	return res, errors.Join(missed...)
}

// complete sends one completion request for tenant.
func complete(srv *demo.Loopback, tenant, priority string) (demo.Reply, error) {
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/complete", nil)
	if err != nil {
		return demo.Reply{}, err
	}
	req.Header.Set("X-Tenant", tenant)
	req.Header.Set("X-Estimated-Tokens", strconv.Itoa(estimate))
	if priority != "" {
		req.Header.Set("X-Priority", priority)
	}
	return srv.Do(req)
}

// budgetScene returns how many tokens the served requests of a tenant
// with a budget of testBudget tokens used, sending from 8 clients until
// refused.
func budgetScene() (int64, error) {
	h, err := newHandler(testBudget, newModel())
	if err != nil {
		return 0, err
	}
	srv, err := demo.Serve(h)
	if err != nil {
		return 0, err
	}
	defer srv.Close()
	var mu sync.Mutex
	var used int64
	var first error
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range testBudget / usedMin { // bounded: more than the budget allows
				r, err := complete(srv, "metered", "")
				if err != nil || r.Status != http.StatusOK {
					mu.Lock()
					if err == nil && r.Status != http.StatusTooManyRequests {
						err = fmt.Errorf("budget scene: status %d, want 200 or 429", r.Status)
					}
					first = firstErr(first, err)
					mu.Unlock()
					return
				}
				n, err := strconv.ParseInt(r.Header.Get("X-Tokens-Used"), 10, 64)
				mu.Lock()
				used += n
				first = firstErr(first, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return used, first
}

// firstErr returns the first of errors a and b that is not nil.
func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// load starts n clients of tenant at priority, each sending request after
// request until stop is closed; the func it returns waits for them and
// returns the latencies of the requests served, the count of those shed
// (503), and the first other failure.
func load(srv *demo.Loopback, tenant, priority string, n int, stop <-chan struct{}) func() ([]time.Duration, int, error) {
	var mu sync.Mutex
	var lat []time.Duration
	var refused int
	var first error
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				r, err := complete(srv, tenant, priority)
				took := time.Since(start)
				mu.Lock()
				switch {
				case err != nil:
					first = firstErr(first, err)
				case r.Status == http.StatusOK:
					lat = append(lat, took)
				case r.Status == http.StatusServiceUnavailable:
					refused++
				default:
					first = firstErr(first, fmt.Errorf("%s: status %d", tenant, r.Status))
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	return func() ([]time.Duration, int, error) {
		wg.Wait()
		return lat, refused, first
	}
}

// fairScene runs two gateways side by side for sceneFor, so that whatever
// else the machine does meets both alike: on one the quiet tenant alone,
// on the other the quiet tenant beside the noisy one. A loaded machine may
// serve too few quiet requests in that time for a p99: the scene then runs
// again, adding to what it measured, a few times at most. It returns the
// quiet tenant's p99 on each, and how many of its requests the second
// refused.
func fairScene() (alone, loaded time.Duration, refused int, err error) {
	var srvs [2]*demo.Loopback
	for i := range srvs {
		h, err := newHandler(1<<40, newModel())
		if err != nil {
			return 0, 0, 0, err
		}
		if srvs[i], err = demo.Serve(h); err != nil {
			return 0, 0, 0, err
		}
		defer srvs[i].Close()
	}
	const enough, rounds = 20, 4
	var la, ll []time.Duration
	for range rounds {
		stop := make(chan struct{})
		quietAlone := load(srvs[0], "quiet", "", quietClients, stop)
		quietLoaded := load(srvs[1], "quiet", "", quietClients, stop)
		flood := load(srvs[1], "noisy", "", noisyClients, stop)
		time.Sleep(sceneFor)
		close(stop)
		a, _, err := quietAlone()
		l, r, lerr := quietLoaded()
		_, _, ferr := flood()
		if err = firstErr(firstErr(err, lerr), ferr); err != nil {
			return 0, 0, 0, err
		}
		la, ll, refused = append(la, a...), append(ll, l...), refused+r
		if min(len(la), len(ll)) >= enough {
			break
		}
	}
	if min(len(la), len(ll)) < enough {
		return 0, 0, 0, fmt.Errorf("fair scene: only %d and %d quiet requests served", len(la), len(ll))
	}
	return p99(la), p99(ll), refused, nil
}

// priorityScene returns the share of critical requests served beside a
// flood of batch ones, and how many batch ones were served of those asked.
func priorityScene() (float64, int, int, error) {
	h, err := newHandler(1<<40, newModel())
	if err != nil {
		return 0, 0, 0, err
	}
	srv, err := demo.Serve(h)
	if err != nil {
		return 0, 0, 0, err
	}
	defer srv.Close()
	stop := make(chan struct{})
	crit := load(srv, "acme", "", criticalClients, stop)
	batch := load(srv, "acme", "batch", batchClients, stop)
	time.Sleep(sceneFor)
	close(stop)
	cl, cr, err := crit()
	bl, br, berr := batch()
	if err = firstErr(err, berr); err != nil {
		return 0, 0, 0, err
	}
	if len(cl)+cr == 0 {
		return 0, 0, 0, errors.New("priority scene: no critical request finished")
	}
	return float64(len(cl)) / float64(len(cl)+cr), len(bl), len(bl) + br, nil
}

// loginScene reports whether alice was locked out after logging in with
// her password behind four wrong guesses, and whether her sixth failure
// in all was refused (the rule limits failures at all).
func loginScene() (lockedOut, limited bool, err error) {
	h, err := newHandler(testBudget, newModel())
	if err != nil {
		return false, false, err
	}
	srv, err := demo.Serve(h)
	if err != nil {
		return false, false, err
	}
	defer srv.Close()
	try := func(password string) (int, error) {
		r, err := srv.PostForm("/login", url.Values{"user": {"alice"}, "password": {password}})
		return r.Status, err
	}
	const right = "correct horse battery staple"
	steps := []struct {
		password string
		want     int
	}{{"guess1", 401}, {"guess2", 401}, {"guess3", 401}, {"guess4", 401}, {right, 200}, {right, 200}, {"guess5", 401}, {"guess6", 429}}
	var got []int
	for _, s := range steps {
		st, err := try(s.password)
		if err != nil {
			return false, false, err
		}
		got = append(got, st)
	}
	for i, s := range steps[:6] {
		if got[i] != s.want && s.want == 401 {
			return false, false, fmt.Errorf("login: guess %d answered %d, want 401", i+1, got[i])
		}
	}
	return got[4] != 200 || got[5] != 200, got[6] == 401 && got[7] == 429, nil
}

// p99 returns the 99th percentile of lat.
func p99(lat []time.Duration) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[(len(s)*99+99)/100-1]
}
