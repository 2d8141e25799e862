// Package sfv reads and writes HTTP Structured Field Values (RFC 9651):
// the RateLimit and RateLimit-Policy header fields are Lists of them. shed
// writes those fields with the appenders here (AppendString, AppendInteger:
// no allocation, for the response hot path) and its tests parse what it
// wrote strictly; upstream reads what a service sent with ParseList,
// keeping a bounded part of it, and ignores a field that does not parse.
//
// The parsers follow RFC 9651 section 4.2 for Lists, Dictionaries and
// Items, every type included (Dates and Display Strings too); Append*
// serialize by section 4.1. Nothing here keeps state: every function is
// safe for concurrent use. Errors start with "sfv: ".
package sfv

import "fmt"

// Kind is the type of a bare item, or InnerList for a member that is an
// Inner List. The zero Kind is no value.
type Kind uint8

// The kinds of RFC 9651 section 3.3, and InnerList.
const (
	Integer Kind = iota + 1
	Decimal
	String
	Token
	ByteSequence
	Boolean
	Date
	DisplayString
	InnerList
)

// MaxInteger is the largest magnitude an Integer (or a Date) can have: 15
// decimal digits (RFC 9651 section 3.3.1).
const MaxInteger = 999_999_999_999_999

// MaxDecimal is the largest magnitude of a Decimal in thousandths: 12
// integer and 3 fraction digits (section 3.3.2).
const MaxDecimal = 999_999_999_999_999

// Value is a bare item of kind Kind. N holds an Integer or a Date, a
// Decimal in thousandths (exact: a Decimal has at most 3 fraction digits),
// a Boolean as 0 or 1. S holds a String or a Display String unescaped, a
// Token, or a Byte Sequence's base64 text as sent (the parser checks that
// it decodes). The zero Value is no value.
type Value struct {
	Kind Kind
	N    int64
	S    string
}

// Param is one parameter of an item or inner list.
type Param struct {
	Key string
	Value
}

// Member is one member of a List or Dictionary, or a lone Item: a bare
// item, or an Inner List (Kind InnerList, its members in Inner), with its
// parameters in the order sent, repeated keys included.
type Member struct {
	Value
	Inner  []Member
	Params []Param
}

// DictMember is one member of a Dictionary: its key and its value. A key
// sent without a value is the Boolean true, as RFC 9651 has it.
type DictMember struct {
	Key string
	Member
}

// Param returns the value of the parameter key: the last one when the key
// is repeated, since RFC 9651 has later values overwrite earlier ones.
func (m Member) Param(key string) (Value, bool) {
	for i := len(m.Params) - 1; i >= 0; i-- {
		if m.Params[i].Key == key {
			return m.Params[i].Value, true
		}
	}
	return Value{}, false
}

// IntParam returns the parameter key when its value is an Integer.
func (m Member) IntParam(key string) (int64, bool) {
	v, ok := m.Param(key)
	return v.N, ok && v.Kind == Integer
}

// Error says why a field value is not a valid Structured Field, and at
// which byte.
type Error struct {
	field string
	at    int
	msg   string
}

// Offset returns the byte of the field value at which the parse failed.
func (e *Error) Offset() int { return e.at }

func (e *Error) Error() string {
	// Quote the field, or for a long one the stretch around the fault.
	if len(e.field) > 64 {
		from, to := max(0, e.at-24), min(len(e.field), e.at+24)
		return fmt.Sprintf("sfv: structured field ...%q...: byte %d: %s", e.field[from:to], e.at, e.msg)
	}
	return fmt.Sprintf("sfv: structured field %q: byte %d: %s", e.field, e.at, e.msg)
}
