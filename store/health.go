package store

// Health is a store's report on its own backend, for stores that can
// degrade, such as a fallback.Store: whether decisions are being made
// locally instead of on the shared backend, and on what share of each limit.
type Health struct {
	// Degraded reports that the shared backend is bypassed: decisions are
	// made locally, on this instance's share of each limit.
	Degraded bool
	// Instances is the number of instances sharing each limit, and Share
	// the fraction of each limit this instance enforces while degraded.
	Instances int64
	Share     float64
	// FallbackDecisions counts decisions made locally; BackendErrors the
	// calls to the backend that failed; Trips and Recoveries the changes to
	// degraded mode and back.
	FallbackDecisions, BackendErrors, Trips, Recoveries uint64
}

// HealthReporter is implemented by stores that report their Health. Health
// must be cheap and safe for concurrent use: it is read at metric scrapes.
type HealthReporter interface {
	Health() Health
}
