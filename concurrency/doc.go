// Package concurrency holds sluice's lock-free primitives that bound
// inflight work: a weighted Semaphore, a ShardedSemaphore for global caps
// on many cores, the capacity hooks that wake a waiting queue, and a
// bounded keyed Table that holds per-client state (Table, TableStats,
// PeekRef, the Overflow policies, TableBytes).
//
// Admit paths take no lock and allocate nothing. Constructors reject zero,
// negative and out-of-range parameters with an error whose text starts with
// "concurrency:"; nothing is silently clamped.
//
// The rate algorithms (GCRA token bucket, fixed and sliding windows,
// sliding log, their sharded variants and reservations) and their
// vocabulary (Rate, Decision, Never) are in package ratelimit, whose states
// a Table keeps per key. The dependency runs one way: ratelimit never
// imports concurrency, so that a Table can be generic over any state and
// its tests can use ratelimit's; what both share (the shard-count option,
// the choice of a shard, the allocator's size classes) lives in internal
// packages. ShardedOption is the same type in both packages.
package concurrency
