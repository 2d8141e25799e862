package loggate

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestLatestWritesTheLastStateOfARunOncePerInterval(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	var l Latest
	now := int64(1_000) * sec
	l.Set(now, log, slog.LevelWarn, "down")
	l.Set(now+sec/10, log, slog.LevelWarn, "up")
	l.Set(now+sec/5, log, slog.LevelWarn, "down", slog.Int("n", 2))
	l.Flush(now + sec/2) // still within the interval of the first line
	if got := strings.Count(buf.String(), "\n"); got != 1 {
		t.Fatalf("%d lines within one interval, want 1:\n%s", got, buf.String())
	}
	l.Flush(now + sec)
	want := "level=WARN msg=down\nlevel=WARN msg=down n=2 changes=2\n"
	if buf.String() != want {
		t.Fatalf("log:\n%s\nwant:\n%s", buf.String(), want)
	}
	l.Flush(now + 5*sec) // nothing waiting
	if buf.String() != want {
		t.Fatalf("a flush with nothing waiting wrote:\n%s", buf.String())
	}
}
