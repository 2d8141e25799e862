// Package storetest is the conformance harness of store.Store: one table of
// tests that every implementation runs (store's own tests run it on
// store.Memory; a network store runs it against its server, skipping by
// name with WithSkip what it does not keep), plus Faulty, a Store wrapper
// that fails on demand for testing fail-open and fail-closed callers, and
// what the network stores' own tests share: a private server process
// (StartProcess, FreePort, WaitReady; paused and killed for fault tests),
// the skip-or-fail of a missing service (Missing, under the
// SLUICE_REQUIRE_* variables CI sets), the tries of a fault test with a
// doubling deadline (RetryDoubling) and a fallback's try across a pause
// (FallbackPause), DecideAsMemory (a store on its server's clock decides as
// store.Memory at the instants it reports) and the tests built on it
// (DecidesAsMemory, HugeDecideAsMemory, WindowsAsMemory), LogBuffer (a
// Fallback's log lines, read while it writes) and the one-line SpecOf,
// MustRegister and Decide.
package storetest
