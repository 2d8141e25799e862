// Command llmgateway puts sluice in front of a language model shared by
// many tenants, the way an LLM gateway does. One Controller, three rules:
//
//   - a daily token budget per tenant (a FixedWindow per Tenant): each
//     request is charged its estimate up front (X-Estimated-Tokens, its
//     max_tokens) and, once the model answered, the tokens it really used
//     (X-Tokens-Used, from the upstream's usage report): the difference is
//     charged or given back (shed.WithActualCost). A tenant can overspend
//     its budget only by what the requests in flight underestimated (see
//     overspendAllowance), never more: a spent budget admits nothing new;
//
//   - the model's capacity, tokens in flight (a Global Concurrency rule in
//     tokens), shared fairly among tenants (Queue.FairShare): a busy
//     tenant is guaranteed its share, a tenant flooding the gateway
//     borrows only what the others leave idle and gives it back as its
//     requests end; critical requests (the default) are served before
//     batch ones (X-Priority: batch), and a quarter of the capacity is kept
//     for critical work (Queue.Reserve); a request waits at most 250 ms
//     for its turn, then it is shed (503 with Retry-After);
//
//   - logins per account, counting only failures (Rule.Count: 401 and
//     403): four wrong passwords and then the right one do not lock the
//     real user out; the fifth failure in 15 minutes does.
//
// examples/policies/llm-gateway.json is the same as a policy file.
//
//	go run ./examples/llmgateway              # serve on 127.0.0.1:8086
//	go run ./examples/llmgateway -selftest    # drive budgets, a noisy tenant, batch work and logins against itself
package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/examples/internal/demo"
	"github.com/sluicehq/sluice/shed"
)

const (
	// upstreamTokens is how many tokens the model generates at once: the
	// capacity the tenants share.
	upstreamTokens = 5000
	// estimate is what the self-test's requests announce (max_tokens),
	// and usedMin, usedMax the range of what they really use: an estimate
	// can be low.
	estimate         = 500
	usedMin, usedMax = 300, 700
	// perToken is the model's time per token generated.
	perToken = 100 * time.Microsecond
	// dailyBudget is a tenant's budget when serving.
	dailyBudget = 1_000_000
)

// overspendAllowance is by how many tokens a tenant can exceed its budget
// at most: the requests in flight when the budget runs out (at most
// upstreamTokens/estimate of them, the model's capacity) each used at most
// usedMax-estimate more than they were charged up front.
const overspendAllowance = upstreamTokens / estimate * (usedMax - estimate)

func main() {
	demo.Command{
		Addr:     "127.0.0.1:8086",
		Drives:   "drive budgets, a noisy tenant, batch work and logins against itself",
		SelfTest: func(out io.Writer) error { _, err := selfTest(out); return err },
		Serve: func(out io.Writer, addr string) (http.Handler, error) {
			h, err := newHandler(dailyBudget, newModel())
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(out, "LLM gateway on http://%s/v1/complete: %d tokens a day per X-Tenant, %d tokens in flight shared fairly\n",
				addr, dailyBudget, upstreamTokens)
			fmt.Fprintf(out, "try: curl -si -X POST -H 'X-Tenant: acme' -H 'X-Estimated-Tokens: 500' http://%s/v1/complete\n", addr)
			fmt.Fprintf(out, "     curl -si -X POST -H 'X-Tenant: acme' -H 'X-Priority: batch' -H 'X-Estimated-Tokens: 500' http://%s/v1/complete\n", addr)
			fmt.Fprintf(out, "     curl -si -d user=alice -d password=guess http://%s/login\n", addr)
			return h, nil
		},
	}.Main()
}

// newHandler returns the gateway, with a daily budget of budget tokens
// per tenant, in front of model.
func newHandler(budget int64, model *model) (http.Handler, error) {
	sluice, err := shed.New(rules(budget),
		shed.WithCategory(func(r *http.Request) string {
			if r.URL.Path == "/login" {
				return "auth"
			}
			return "llm"
		}),
		// Who is asking: the tenant and the account come from the
		// gateway's authentication (here, a header and the login form).
		shed.WithClient(func(r *http.Request) shed.Client {
			if r.URL.Path == "/login" {
				return shed.Client{User: r.PostFormValue("user")}
			}
			p := shed.Critical
			if r.Header.Get("X-Priority") == "batch" {
				p = shed.Sheddable
			}
			return shed.Client{Tenant: r.Header.Get("X-Tenant"), Priority: p}
		}),
		// The estimate up front, the usage the model reported after.
		shed.WithCost(func(r *http.Request) int64 {
			n, err := strconv.ParseInt(r.Header.Get("X-Estimated-Tokens"), 10, 64)
			if err != nil || n <= 0 {
				return 1
			}
			return n
		}),
		shed.WithActualCost(func(h http.Header) (int64, bool) {
			n, err := strconv.ParseInt(h.Get("X-Tokens-Used"), 10, 64)
			return n, err == nil
		}),
	)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/complete", sluice.Middleware(http.HandlerFunc(model.complete)))
	mux.Handle("POST /login", http.MaxBytesHandler(sluice.Middleware(http.HandlerFunc(login)), 4<<10))
	return mux, nil
}

// rules are the gateway's rules, with a daily budget of budget tokens per
// tenant; examples/policies/llm-gateway.json says the same as a policy
// file.
func rules(budget int64) []shed.Rule {
	return []shed.Rule{
		{Name: "tokens-daily", Category: "llm", Identity: shed.Tenant, Algorithm: shed.FixedWindow,
			Limit: budget, Window: 24 * time.Hour},
		{Name: "upstream", Category: "llm", Algorithm: shed.Concurrency, Limit: upstreamTokens,
			MaxWait: 250 * time.Millisecond, QueueLength: 256, Queue: shed.Queue{FairShare: shed.Tenant, Reserve: 0.25}},
		{Name: "login-user", Category: "auth", Identity: shed.User, Algorithm: shed.SlidingLog,
			Limit: 5, Window: 15 * time.Minute, Count: shed.CountAuthFailures, Failure: shed.FailClosed},
	}
}

// model stands in for the language model behind the gateway: a
// completion uses between usedMin and usedMax tokens, perToken each, and
// reports its usage.
type model struct{ rand func() int }

func newModel() *model {
	return &model{rand: func() int { return usedMin + rand.IntN(usedMax-usedMin+1) }}
}

func (m *model) complete(w http.ResponseWriter, r *http.Request) {
	used := m.rand()
	if err := pause(r.Context(), time.Duration(used)*perToken); err != nil {
		http.Error(w, "client went away", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("X-Tokens-Used", strconv.Itoa(used))
	fmt.Fprintf(w, "a completion of %d tokens\n", used)
}

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// login is a stand-in password check.
func login(w http.ResponseWriter, r *http.Request) {
	if r.PostFormValue("user") == "alice" && r.PostFormValue("password") == "correct horse battery staple" {
		fmt.Fprintln(w, "welcome, alice")
		return
	}
	http.Error(w, "wrong user or password", http.StatusUnauthorized)
}
