package membership

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
	"github.com/sluicehq/sluice/store/storetest"
)

// beats records the calls of a Beat and answers them with err.
type beats struct {
	mu    sync.Mutex
	calls []string
	err   error
}

func (b *beats) beat(_ context.Context, memory time.Duration, join bool) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if join {
		b.calls = append(b.calls, "join "+memory.String())
	} else {
		b.calls = append(b.calls, "leave "+memory.String())
	}
	return 1, b.err
}

func (b *beats) seen() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.calls, ", ")
}

// TestFallbacksOfOneInstanceLeaveOnceWhenTheLastCloses: every Fallback of
// an Instance joins through its Beat, and the instance leaves (join
// false, memory 0) once, when the last of them closes.
func TestFallbacksOfOneInstanceLeaveOnceWhenTheLastCloses(t *testing.T) {
	b := &beats{}
	in := New("Test", b.beat)
	opts := []fallback.Option{fallback.WithProbeInterval(time.Hour), fallback.WithInstanceMemory(3 * time.Hour)}
	f1, err := in.Fallback(store.NewMemory(), opts)
	if err != nil {
		t.Fatal(err)
	}
	f2, err := in.Fallback(store.NewMemory(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := f1.Close(); err != nil {
		t.Fatal(err)
	}
	if got := b.seen(); got != "join 3h0m0s, join 3h0m0s" {
		t.Fatalf("after the first of two closed: %s", got)
	}
	if err := f2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := b.seen(); got != "join 3h0m0s, join 3h0m0s, leave 0s" {
		t.Fatalf("after both closed: %s", got)
	}
}

// TestFallbackNamesTheBackendUnlessTheCallerDoes: the log line of a trip
// names the Instance's backend, or the one the caller's
// fallback.WithBackendName gives.
func TestFallbackNamesTheBackendUnlessTheCallerDoes(t *testing.T) {
	for _, c := range []struct {
		opts []fallback.Option
		want string
	}{
		{nil, "fallback: Test unavailable"},
		{[]fallback.Option{fallback.WithBackendName("Mine")}, "fallback: Mine unavailable"},
	} {
		var logs storetest.LogBuffer
		b := &beats{err: store.Unavailable(errors.New("down"))}
		opts := append([]fallback.Option{fallback.WithTripAfter(1), fallback.WithProbeInterval(time.Hour),
			fallback.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))}, c.opts...)
		f, err := New("Test", b.beat).Fallback(store.NewMemory(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs.String(), c.want) {
			t.Errorf("logs %q, want %q", logs.String(), c.want)
		}
	}
}
