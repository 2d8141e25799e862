package policy

import "fmt"

// Error is a problem with a policy file: where it is and what it is.
type Error struct {
	// File is the name given to Parse (the path, for Load).
	File string
	// Line is the 1-based line of the offending field.
	Line int
	// Path is the field path, such as "rules[2].limit"; "" for the
	// document as a whole.
	Path string
	// Err is the problem.
	Err error
}

// Error formats e as "policy: file:line: path: problem".
func (e *Error) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("policy: %s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("policy: %s:%d: %s: %v", e.File, e.Line, e.Path, e.Err)
}

// Unwrap returns the problem, so that errors.Is and errors.As reach a
// shed or concurrency error underneath.
func (e *Error) Unwrap() error { return e.Err }
