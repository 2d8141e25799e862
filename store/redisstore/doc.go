// Package redisstore keeps sluice's limits in Redis, so that every
// instance of a service shares one quota, and falls back to local,
// quota-aware limits when Redis is down or slow.
//
// Store is a store.Store on a go-redis UniversalClient (single node,
// Sentinel, Cluster). Each Decide is one Lua script call, one round trip:
// the script reads Redis's TIME and decides every hit of the request on
// that instant, writing nothing unless all are admitted, with the same
// algorithms and decisions as store.Memory. It needs Redis 7.0 or later
// (the scripts declare themselves with a #!lua line, so that a server over
// maxmemory refuses them whole instead of failing halfway).
//
// NewFallback wraps a Store in package fallback's circuit breaker. While
// Redis answers, it decides there and counts the live instances through
// heartbeats in Redis (a sorted set under the prefix); when Redis fails, it
// decides on a local store.Memory in which every limit is divided by the
// number of instances, so the service as a whole stays within its quota;
// the heartbeat, as a probe, returns it to Redis.
//
// Exchange makes a Store on a global Redis the global store of package
// regions: each region decides on its own Redis, and the regions exchange
// each key's usage there every sync period.
//
// # Keys
//
// Every key is {prefix}:<kind>:<len(name)>:<name>:<key> (see WithPrefix).
// The braces make the prefix the Redis Cluster hash tag: one request may
// name unrelated keys (an IP and an account), and one script can only
// touch keys of one slot, so all keys of one store live in one slot, on
// one master. That is the price of atomic all-or-nothing across limits;
// spread load by giving unrelated policies stores of their own prefixes,
// or spread one store's keys by hash tags in the hit keys (WithKeyTags:
// {prefix:tag}, one tag for every key of a request, and the counting
// trade-off it states).
// Hit keys are written into key names as they are: hash secrets first
// (package fingerprint). Every key gets its TTL in the script that writes
// it: two windows for a fixed window and a sliding log, three for a
// sliding window counter (it reads the previous window), twice the time to
// refill for a token bucket, twice the time to the last lease's expiry for
// leases. Use a dedicated Redis
// with maxmemory-policy noeviction: an evicted limiter key is a silently
// reset limit.
//
// # Resolution
//
// Redis's TIME has microsecond resolution. Windows and lease TTLs must be
// whole microseconds (Register rejects others). The token bucket computes
// in nanoseconds relative to the server's time, exact for spans up to 104
// days; the windows compute in microseconds and align to multiples of the
// window since a fixed epoch, so a RetryAfter is never earlier than the
// exact one. Lease IDs are unique per key unless a key's state issued more
// than 16 leases per microsecond of its life.
//
// Refund (store.Refunder) gives a window's count back in the window that
// counted it, the one of the admitting decision's TIME (store.Result.Now),
// never to a later window; a sliding log's entries made at that instant
// or before, never an admission made since; a bucket's debt as of the
// server's clock at the refund, only what the admission's tokens still
// weigh then (ratelimit.GCRA.RefundLate, with its limit).
//
// A token bucket hit with a max wait (store.Hit.MaxWait) reserves its slot
// in the same script, as Memory does, and Refund cancels the reservation
// only while the key's state is the one the reservation left, so that a
// later waiter's slot never moves; waits are exact on the same terms as
// the bucket (spans up to 104 days).
//
// # Instances
//
// While Redis answers every instance, a limit holds exactly across them.
// While it fails for all of them, each decides on limit ÷ N locally (N as
// it was when its breaker opened, however few instances a Redis that
// comes back empty counts before the breaker closes), so together they
// admit at most the limit from then on (the local stores do not know what
// Redis had counted in the current window). When k of N instances lose
// Redis while the others keep it (a partition), those on Redis share the
// whole limit and each cut-off instance admits its share: at most
// limit·(1 + k/N) in all, 40 for a limit of 30 when one of three is cut
// off (TestPartitionAdmitsAtMostOneShareMore measures it). A cut-off
// instance goes on counting in the others' N for the instance memory (a
// minute by default, see fallback.WithInstanceMemory), so the bound still holds
// when Redis then fails for them too within that time; one that Closes
// leaves N at once. (These are package fallback's bounds, the same on
// every remote store.)
//
// # Failures
//
// A Store call fails with an error matching store.ErrUnavailable when
// Redis fails or misses the per-call deadline (WithTimeout; 20 ms by
// default) and with the caller's ctx.Err() when the caller gives up first.
// Scripts are never retried by go-redis (whatever the client's
// MaxRetries), because a reply lost after the script ran would charge the
// request twice; EVALSHA's NOSCRIPT (after a restart, a failover or
// SCRIPT FLUSH) is answered by sending the script once more, which is safe
// because it did not run. On Redis Cluster, a failed call also asks the
// client to reload its slot map (in the background, at most one reload at
// a time), because go-redis otherwise keeps sending a dead master's slots
// to it until its ClusterStateReloadInterval (a minute by default): so a
// Fallback decides on Redis again within about its recovery hysteresis
// (fallback.WithRecoverAfter probe intervals, 3 s by default) of the cluster's
// failover (3.3 s in TestClusterFailoverRecovery; without the reload it
// was still degraded 20 s after the failover).
package redisstore
