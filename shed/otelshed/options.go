package otelshed

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
)

// Option configures New.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	attrs []attribute.KeyValue
}

// WithAttributes adds attrs to every data point of the Metrics, so that
// several Controllers exported through one MeterProvider can be told apart
// (sluice.controller="api" and "jobs"): their instruments are the same.
// Each value should be one of a few fixed names, never a client's key. New
// returns an error for an invalid attribute, a key given twice, and a key
// that otelshed sets itself (sluice.outcome, sluice.rule.name,
// sluice.rule.category, sluice.rule.identity, sluice.rule.algorithm,
// sluice.store.mode). Several WithAttributes add up.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return optionFunc(func(c *config) error {
		if len(attrs) == 0 {
			return errors.New("otelshed: WithAttributes without attributes")
		}
		for _, kv := range attrs {
			switch {
			case !kv.Valid():
				return fmt.Errorf("otelshed: invalid attribute %q", kv.Key)
			case ownKey(kv.Key):
				return fmt.Errorf("otelshed: attribute %q is otelshed's own", kv.Key)
			}
			for _, prev := range c.attrs {
				if prev.Key == kv.Key {
					return fmt.Errorf("otelshed: attribute %q given twice", kv.Key)
				}
			}
			c.attrs = append(c.attrs, kv)
		}
		return nil
	})
}

// ownKey reports whether k is an attribute key otelshed sets itself.
func ownKey(k attribute.Key) bool {
	switch k {
	case keyOutcome, keyRule, keyCategory, keyIdentity, keyAlgorithm, keyMode:
		return true
	}
	return false
}
