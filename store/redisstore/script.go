package redisstore

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/store"
)

//go:embed decide.lua
var decideSrc string

//go:embed release.lua
var releaseSrc string

//go:embed heartbeat.lua
var heartbeatSrc string

//go:embed exchange.lua
var exchangeSrc string

// script is a Lua script and its SHA-1, the name EVALSHA calls it by.
type script struct{ src, sha string }

func newScript(src string) script {
	sum := sha1.Sum([]byte(src))
	return script{src: src, sha: hex.EncodeToString(sum[:])}
}

// noRetryCmd is a command go-redis must never send twice, whatever the
// client's MaxRetries: a script whose reply was lost may have run, and a
// second run would charge the request again. go-redis still follows
// MOVED and ASK redirections, which mean the script did not run.
type noRetryCmd struct{ *redis.Cmd }

func (noRetryCmd) NoRetry() bool { return true }

// run calls sc with keys and args within the store's deadline: EVALSHA,
// and EVAL (which also caches the script) when the server answers
// NOSCRIPT after a restart, a failover or SCRIPT FLUSH; NOSCRIPT means the
// script did not run, so that is no double charge. It returns the caller's
// ctx.Err() when ctx ended, and an error matching store.ErrUnavailable for
// every other failure, after which a Cluster client reloads its slot map.
func (s *Store) run(ctx context.Context, sc *script, keys []string, args []any) ([]any, error) {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	cmdArgs := make([]any, 0, 3+len(keys)+len(args))
	cmdArgs = append(cmdArgs, "evalsha", sc.sha, len(keys))
	for _, k := range keys {
		cmdArgs = append(cmdArgs, k)
	}
	cmdArgs = append(cmdArgs, args...)
	cmd := redis.NewCmd(cctx, cmdArgs...)
	err := s.client.Process(cctx, noRetryCmd{cmd})
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmdArgs[0], cmdArgs[1] = "eval", sc.src
		cmd = redis.NewCmd(cctx, cmdArgs...)
		err = s.client.Process(cctx, noRetryCmd{cmd})
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if s.cluster != nil {
			// go-redis reloads the slot map on MOVED, or every
			// ClusterStateReloadInterval (a minute by default), but not
			// when a call that must not be retried fails: without this, a
			// failed-over master keeps its slots for the client, and every
			// call fails, until that interval. The reload runs in the
			// background, at most one at a time.
			s.cluster.ReloadState(ctx)
		}
		return nil, store.Unavailable(err)
	}
	vals, ok := cmd.Val().([]any)
	if !ok {
		return nil, store.Unavailable(fmt.Errorf("redisstore: unexpected script reply %T", cmd.Val()))
	}
	return vals, nil
}

var errReply = errors.New("redisstore: malformed script reply")

// replyInt returns vals[i] as an integer (Lua numbers come back as
// integers, TIME's fields as strings).
func replyInt(vals []any, i int) (int64, error) {
	if i >= len(vals) {
		return 0, errReply
	}
	switch v := vals[i].(type) {
	case int64:
		return v, nil
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, errReply
		}
		return n, nil
	}
	return 0, errReply
}
