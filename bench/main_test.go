package bench

import (
	"os"
	"testing"

	"github.com/zeromicro/go-zero/core/logx"
)

// TestMain silences go-zero's once-a-minute usage report, which its stat
// package starts at import and which would otherwise land in the middle of
// benchmark output lines and break their parsing.
func TestMain(m *testing.M) {
	logx.DisableStat()
	os.Exit(m.Run())
}
