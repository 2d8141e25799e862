// Package storetest is the conformance harness of store.Store: one table of
// tests that every implementation runs (store's own tests run it on
// store.Memory; a network store runs it against its server), plus Faulty, a
// Store wrapper that fails on demand for testing fail-open and fail-closed
// callers.
package storetest
