package bench

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/zeromicro/go-zero/core/logx"
)

// quietRedis drops go-redis's log lines (failed dials while the benchmark's
// Redis is down on purpose), which would land inside benchmark lines.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// TestMain silences the libraries that write into benchmark output: go-zero's
// once-a-minute usage report (started by its stat package at import) and
// go-redis's logger. Either would break the lines that benchstat parses.
func TestMain(m *testing.M) {
	logx.DisableStat()
	redis.SetLogger(quietRedis{})
	os.Exit(m.Run())
}
