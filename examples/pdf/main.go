// Command pdf protects an endpoint that renders PDFs and archives each one
// in a fragile downstream service. Rendering is slow and memory-hungry, so
// at most 2 run at once; a request finding both busy waits in a bounded
// queue (4 places, at most 1 s) instead of being refused at once, and is
// refused with 503 and Retry-After when the queue is full or its wait runs
// out. The archive takes 5 uploads a second and falls over under bursts, so
// uploads go out through a queueing.Pacer: evenly spaced, never faster.
//
// The render limit is a shed rule (Global Concurrency with MaxWait and
// QueueLength, which waits in a queueing.Queue), decided with
// Controller.Decide so that the permit covers the render only, not the
// paced upload.
//
//	go run ./examples/pdf              # serve on 127.0.0.1:8082
//	go run ./examples/pdf -selftest    # drive two bursts against itself
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/examples/internal/demo"
	"github.com/sluicehq/sluice/queueing"
	"github.com/sluicehq/sluice/shed"
)

const (
	renders     = 2                      // at once
	queueLength = 4                      // waiting at most
	maxWait     = time.Second            // in the queue at most
	uploads     = 5                      // per second, to the archive
	renderTime  = 300 * time.Millisecond // of the simulated renderer
)

func main() {
	demo.Command{
		Addr:     "127.0.0.1:8082",
		Drives:   "drive two bursts against itself",
		SelfTest: func(out io.Writer) error { _, err := selfTest(out); return err },
		Serve: func(out io.Writer, addr string) (http.Handler, error) {
			svc, err := newService(simulatedRender, func(context.Context, []byte) error { return nil })
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(out, "PDFs on http://%s/pdf: %d renders at once, %d more may wait up to %v, uploads paced at %d/s\n",
				addr, renders, queueLength, maxWait, uploads)
			fmt.Fprintf(out, "try: curl -sZ -o /dev/null -w '%%{http_code} %%{time_total}s\\n' 'http://%s/pdf?n=[1-10]' 2>/dev/null\n", addr)
			return svc.handler(), nil
		},
	}.Main()
}

// service renders PDFs under the render limit and archives them through
// the pacer.
type service struct {
	limit  *shed.Controller
	pacer  *queueing.Pacer
	render func(context.Context) ([]byte, error)
	upload func(context.Context, []byte) error
}

func newService(render func(context.Context) ([]byte, error), upload func(context.Context, []byte) error) (*service, error) {
	limit, err := shed.New([]shed.Rule{
		{Name: "renders", Algorithm: shed.Concurrency, Limit: renders, MaxWait: maxWait, QueueLength: queueLength},
	})
	if err != nil {
		return nil, err
	}
	pacer, err := queueing.NewPacer(uploads, time.Second)
	if err != nil {
		return nil, err
	}
	return &service{limit: limit, pacer: pacer, render: render, upload: upload}, nil
}

func (s *service) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /pdf", s.servePDF)
	return mux
}

func (s *service) servePDF(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d, tok, err := s.limit.Decide(ctx, shed.Attempt{}) // waits in the queue if both renders are busy
	if err != nil {
		return // the client went away while waiting
	}
	d.WriteHeaders(w.Header())
	if !d.Allowed {
		d.WriteRejection(w) // 503, Retry-After, problem+json
		return
	}
	pdf, err := s.render(ctx)
	tok.Done(adaptive.OutcomeOf(err))
	if err != nil {
		http.Error(w, "render failed", http.StatusInternalServerError)
		return
	}
	if err := s.pacer.Wait(ctx); err != nil { // the archive's pace, outside the render limit
		return
	}
	if err := s.upload(ctx, pdf); err != nil {
		http.Error(w, "archive failed", http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/pdf")
	w.Write(pdf)
}

// simulatedRender stands in for a renderer: it takes renderTime.
func simulatedRender(ctx context.Context) ([]byte, error) {
	select {
	case <-time.After(renderTime):
		return []byte("%PDF-1.7\n"), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
