package storetest

import (
	"strings"
	"sync"
)

// LogBuffer is a log destination (the io.Writer of a slog handler) that a
// test reads while a store's goroutine writes to it: Write and String are
// safe for concurrent use. The zero value is an empty buffer.
type LogBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
