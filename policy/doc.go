// Package policy reads shed rules from declarative policy files: JSON
// documents that operators can read, review, change and test before they
// enforce them (dry-run). A file holds endpoint categories (route patterns
// and method classes), rules (identity, algorithm, limits, failure mode,
// soft limit, dry-run, waiting), an optional penalty box, and plan tiers.
//
// Parsing is strict: unknown fields, values of the wrong type, bad
// durations and limits that make no sense are errors that name the file,
// the line and the field path, such as
//
//	policy: api.json:12: rules[2].limit: must be positive, got 0
//
// Durations are strings in Go's syntax with a "d" (24h) unit added:
// "15m", "1h30m", "1d". Rates are objects: {"count": 5, "per": "1m"}.
//
// JSON comes from the standard library; YAML is not supported, since no
// YAML parser is in the standard library and the project admits no heavy
// dependency for a second syntax of the same data.
package policy
