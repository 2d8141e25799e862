package shed

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The RateLimit and RateLimit-Policy header fields are Structured Field
// Lists (RFC 9651). parseSFList reads one: the Transport reads what an
// upstream sent with it, and the tests check with it that what the
// middleware writes is valid.

// sfKind is the type of a Structured Field bare item, or sfInnerList.
type sfKind uint8

const (
	sfInteger sfKind = iota + 1
	sfDecimal
	sfString
	sfToken
	sfByteSequence
	sfBoolean
	sfDate
	sfDisplayString
	sfInnerList
)

// sfValue is a bare item. n holds an Integer or a Date, a Decimal in
// thousandths (exact: it has at most 12 integer and 3 fraction digits), a
// Boolean as 0 or 1. s holds a String or a Display String unescaped, a
// Token, or a Byte Sequence's base64 text as sent (checked to decode).
type sfValue struct {
	kind sfKind
	n    int64
	s    string
}

// sfParam is one parameter of an item or inner list.
type sfParam struct {
	key string
	sfValue
}

// sfItem is one member of a List: an Item, or an Inner List (kind
// sfInnerList, its members in inner), with its parameters in the order
// sent, repeated keys included.
type sfItem struct {
	sfValue
	inner  []sfItem
	params []sfParam
}

// param returns the value of the parameter key: the last one when the key
// is repeated, since RFC 9651 has later values overwrite earlier ones.
func (it sfItem) param(key string) (sfValue, bool) {
	for i := len(it.params) - 1; i >= 0; i-- {
		if it.params[i].key == key {
			return it.params[i].sfValue, true
		}
	}
	return sfValue{}, false
}

// intParam returns the parameter key when its value is an Integer.
func (it sfItem) intParam(key string) (int64, bool) {
	v, ok := it.param(key)
	return v.n, ok && v.kind == sfInteger
}

// sfError says why a field value is not a valid Structured Field, and at
// which byte.
type sfError struct {
	field string
	at    int
	msg   string
}

func (e *sfError) Error() string {
	// Quote the field, or for a long one the stretch around the fault.
	if len(e.field) > 64 {
		from, to := max(0, e.at-24), min(len(e.field), e.at+24)
		return fmt.Sprintf("shed: structured field ...%q...: byte %d: %s", e.field[from:to], e.at, e.msg)
	}
	return fmt.Sprintf("shed: structured field %q: byte %d: %s", e.field, e.at, e.msg)
}

// parseSFList parses s, a List field value, by the rules of RFC 9651
// (sections 4.2 and 4.2.1), all its types included. It keeps the first keep
// (at least 1) members of the list, and of each member the first keep
// parameters and inner-list members; the rest are checked, then dropped, so
// that a hostile field costs bounded memory. A blank s is the empty List.
// For a value that is not a valid List it returns an *sfError that says
// what is wrong where.
func parseSFList(s string, keep int) ([]sfItem, error) {
	p := sfParser{s: s, keep: keep}
	p.skipSP()
	if p.i == len(s) {
		return nil, nil
	}
	// Commas and semicolons bound how many members and parameters s holds
	// (strings may hold some too): the members take one allocation, and so
	// do the parameters, up to 64 of them.
	items := make([]sfItem, 0, min(keep, strings.Count(s, ",")+1))
	p.params = make([]sfParam, 0, min(strings.Count(s, ";"), 64))
	for {
		store := len(items) < keep
		it, err := p.member(store)
		if err != nil {
			return nil, err
		}
		if store {
			items = append(items, it)
		}
		p.skipOWS()
		if p.i == len(s) {
			return items, nil
		}
		if s[p.i] != ',' {
			return nil, p.fail("expected ',' after a list member")
		}
		p.i++
		p.skipOWS()
		if p.i == len(s) {
			return nil, p.fail("trailing ',' ends the list")
		}
	}
}

// sfParser is the state of one parseSFList: the input, the position in it,
// and the backing arrays all members' parameters and inner lists are cut
// from.
type sfParser struct {
	s      string
	i      int
	keep   int
	params []sfParam
	inner  []sfItem
}

func (p *sfParser) fail(msg string) error { return p.failAt(p.i, msg) }

func (p *sfParser) failAt(at int, msg string) error {
	return &sfError{field: p.s, at: at, msg: msg}
}

func (p *sfParser) skipSP() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *sfParser) skipOWS() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// member parses an Item or an Inner List (section 4.2.1.1); store false
// checks it without keeping its parameters or inner-list members.
func (p *sfParser) member(store bool) (sfItem, error) {
	if p.i < len(p.s) && p.s[p.i] == '(' {
		return p.innerList(store)
	}
	return p.item(store)
}

// innerList parses an Inner List (section 4.2.1.2).
func (p *sfParser) innerList(store bool) (sfItem, error) {
	open := p.i
	p.i++ // '('
	start, n := len(p.inner), 0
	for {
		p.skipSP()
		if p.i == len(p.s) {
			return sfItem{}, p.failAt(open, "inner list has no closing ')'")
		}
		if p.s[p.i] == ')' {
			p.i++
			it := sfItem{sfValue: sfValue{kind: sfInnerList}}
			if len(p.inner) > start {
				it.inner = p.inner[start:len(p.inner):len(p.inner)]
			}
			var err error
			it.params, err = p.parameters(store)
			return it, err
		}
		keepIt := store && n < p.keep
		it, err := p.item(keepIt)
		if err != nil {
			return sfItem{}, err
		}
		if keepIt {
			p.inner = append(p.inner, it)
		}
		n++
		if p.i < len(p.s) && p.s[p.i] != ' ' && p.s[p.i] != ')' {
			return sfItem{}, p.fail("expected ' ' or ')' after an inner-list member")
		}
	}
}

// item parses an Item (section 4.2.3).
func (p *sfParser) item(store bool) (sfItem, error) {
	v, err := p.bareItem()
	if err != nil {
		return sfItem{}, err
	}
	params, err := p.parameters(store)
	return sfItem{sfValue: v, params: params}, err
}

// parameters parses Parameters (section 4.2.3.2), keeping them in the
// order sent.
func (p *sfParser) parameters(store bool) ([]sfParam, error) {
	start, n := len(p.params), 0
	for p.i < len(p.s) && p.s[p.i] == ';' {
		p.i++
		p.skipSP()
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		v := sfValue{kind: sfBoolean, n: 1}
		if p.i < len(p.s) && p.s[p.i] == '=' {
			p.i++
			if v, err = p.bareItem(); err != nil {
				return nil, err
			}
		}
		if store && n < p.keep {
			p.params = append(p.params, sfParam{key: key, sfValue: v})
		}
		n++
	}
	if len(p.params) == start {
		return nil, nil
	}
	return p.params[start:len(p.params):len(p.params)], nil
}

// key parses a Key (section 4.2.3.3).
func (p *sfParser) key() (string, error) {
	start := p.i
	if p.i == len(p.s) || !(sfIsLower(p.s[p.i]) || p.s[p.i] == '*') {
		return "", p.fail("expected a parameter key (a lowercase letter or '*')")
	}
	for p.i < len(p.s) && sfIsKeyChar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i], nil
}

// bareItem parses a Bare Item (section 4.2.3.1).
func (p *sfParser) bareItem() (sfValue, error) {
	if p.i == len(p.s) {
		return sfValue{}, p.fail("expected an item, found the end")
	}
	switch c := p.s[p.i]; {
	case c == '-' || sfIsDigit(c):
		return p.number()
	case c == '"':
		return p.str()
	case sfIsAlpha(c) || c == '*':
		return p.token(), nil
	case c == ':':
		return p.byteSequence()
	case c == '?':
		return p.boolean()
	case c == '@':
		return p.date()
	case c == '%':
		return p.displayString()
	}
	return sfValue{}, p.fail(fmt.Sprintf("%q cannot start an item", p.s[p.i]))
}

// number parses an Integer or a Decimal (section 4.2.4).
func (p *sfParser) number() (sfValue, error) {
	neg := p.s[p.i] == '-'
	if neg {
		p.i++
	}
	if p.i == len(p.s) || !sfIsDigit(p.s[p.i]) {
		return sfValue{}, p.fail("expected a digit")
	}
	var n int64
	digits, frac := 0, -1 // frac: digits after the '.', -1 for an Integer
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '.' && frac < 0 {
			if digits > 12 {
				return sfValue{}, p.fail("decimal has more than 12 integer digits")
			}
			frac = 0
			p.i++
			continue
		}
		if !sfIsDigit(c) {
			break
		}
		if frac < 0 {
			if digits == 15 {
				return sfValue{}, p.fail("integer has more than 15 digits")
			}
			digits++
		} else {
			if frac == 3 {
				return sfValue{}, p.fail("decimal has more than 3 fraction digits")
			}
			frac++
		}
		n = n*10 + int64(c-'0') // at most 15 digits: cannot overflow
		p.i++
	}
	if neg {
		n = -n
	}
	if frac < 0 {
		return sfValue{kind: sfInteger, n: n}, nil
	}
	if frac == 0 {
		return sfValue{}, p.failAt(p.i-1, "decimal ends in '.'")
	}
	for ; frac < 3; frac++ {
		n *= 10
	}
	return sfValue{kind: sfDecimal, n: n}, nil
}

// str parses a String (section 4.2.5). One without escapes is a piece of
// the field, not a copy.
func (p *sfParser) str() (sfValue, error) {
	open := p.i
	p.i++        // '"'
	var b []byte // the unescaped String, once an escape is met
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == '"':
			s := p.s[open+1 : p.i]
			if b != nil {
				s = string(b)
			}
			p.i++
			return sfValue{kind: sfString, s: s}, nil
		case c == '\\':
			if p.i+1 == len(p.s) || (p.s[p.i+1] != '"' && p.s[p.i+1] != '\\') {
				return sfValue{}, p.fail("a backslash in a string escapes only '\"' or '\\'")
			}
			if b == nil {
				b = append([]byte(nil), p.s[open+1:p.i]...)
			}
			b = append(b, p.s[p.i+1])
			p.i += 2
		case c < 0x20 || c > 0x7e:
			return sfValue{}, p.fail("a string holds printable ASCII only")
		default:
			if b != nil {
				b = append(b, c)
			}
			p.i++
		}
	}
	return sfValue{}, p.failAt(open, "string has no closing '\"'")
}

// token parses a Token (section 4.2.6).
func (p *sfParser) token() sfValue {
	start := p.i
	p.i++
	for p.i < len(p.s) && sfIsTokenChar(p.s[p.i]) {
		p.i++
	}
	return sfValue{kind: sfToken, s: p.s[start:p.i]}
}

// byteSequence parses a Byte Sequence (section 4.2.7). It checks that the
// base64 text decodes, with the padding synthesized where it is missing,
// and keeps the text.
func (p *sfParser) byteSequence() (sfValue, error) {
	open := p.i
	p.i++ // ':'
	start, pad := p.i, 0
	for ; p.i < len(p.s) && p.s[p.i] != ':'; p.i++ {
		switch c := p.s[p.i]; {
		case c == '=':
			pad++
		case pad > 0 && (sfIsAlpha(c) || sfIsDigit(c) || c == '+' || c == '/'):
			return sfValue{}, p.fail("base64 after '=' padding in a byte sequence")
		case !(sfIsAlpha(c) || sfIsDigit(c) || c == '+' || c == '/'):
			return sfValue{}, p.fail("a byte sequence holds base64 only")
		}
	}
	if p.i == len(p.s) {
		return sfValue{}, p.failAt(open, "byte sequence has no closing ':'")
	}
	// Four base64 characters carry three bytes; a last group of one
	// character carries none, and padding fills a group up to four.
	if data := p.i - start - pad; data%4 == 1 || pad > (4-data%4)%4 {
		return sfValue{}, p.failAt(start, "byte sequence is not base64: wrong length or padding")
	}
	v := sfValue{kind: sfByteSequence, s: p.s[start:p.i]}
	p.i++
	return v, nil
}

// boolean parses a Boolean (section 4.2.8).
func (p *sfParser) boolean() (sfValue, error) {
	p.i++ // '?'
	if p.i == len(p.s) || (p.s[p.i] != '0' && p.s[p.i] != '1') {
		return sfValue{}, p.fail("expected '0' or '1' after '?'")
	}
	v := sfValue{kind: sfBoolean, n: int64(p.s[p.i] - '0')}
	p.i++
	return v, nil
}

// date parses a Date (section 4.2.9).
func (p *sfParser) date() (sfValue, error) {
	p.i++ // '@'
	if p.i == len(p.s) || (p.s[p.i] != '-' && !sfIsDigit(p.s[p.i])) {
		return sfValue{}, p.fail("expected an integer after '@'")
	}
	start := p.i
	v, err := p.number()
	if err != nil {
		return sfValue{}, err
	}
	if v.kind != sfInteger {
		return sfValue{}, p.failAt(start, "a date is an integer")
	}
	v.kind = sfDate
	return v, nil
}

// displayString parses a Display String (section 4.2.10): printable ASCII
// and %xx escapes (lowercase hex) of UTF-8.
func (p *sfParser) displayString() (sfValue, error) {
	open := p.i
	if p.i+1 == len(p.s) || p.s[p.i+1] != '"' {
		return sfValue{}, p.fail(`expected '"' after '%'`)
	}
	p.i += 2
	var b []byte // the decoded string, once an escape is met
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == '"':
			s := p.s[open+2 : p.i]
			if b != nil {
				s = string(b)
			}
			if !utf8.ValidString(s) {
				return sfValue{}, p.failAt(open, "display string is not UTF-8")
			}
			p.i++
			return sfValue{kind: sfDisplayString, s: s}, nil
		case c == '%':
			if p.i+2 >= len(p.s) || !sfIsLowerHex(p.s[p.i+1]) || !sfIsLowerHex(p.s[p.i+2]) {
				return sfValue{}, p.fail("'%' in a display string starts two lowercase hex digits")
			}
			if b == nil {
				b = append([]byte(nil), p.s[open+2:p.i]...)
			}
			b = append(b, sfUnhex(p.s[p.i+1])<<4|sfUnhex(p.s[p.i+2]))
			p.i += 3
		case c < 0x20 || c > 0x7e:
			return sfValue{}, p.fail("a display string holds printable ASCII only")
		default:
			if b != nil {
				b = append(b, c)
			}
			p.i++
		}
	}
	return sfValue{}, p.failAt(open, "display string has no closing '\"'")
}

func sfIsDigit(c byte) bool    { return c >= '0' && c <= '9' }
func sfIsLower(c byte) bool    { return c >= 'a' && c <= 'z' }
func sfIsAlpha(c byte) bool    { return sfIsLower(c) || (c >= 'A' && c <= 'Z') }
func sfIsLowerHex(c byte) bool { return sfIsDigit(c) || (c >= 'a' && c <= 'f') }

func sfUnhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

// sfIsKeyChar reports whether c may continue a key.
func sfIsKeyChar(c byte) bool {
	return sfIsLower(c) || sfIsDigit(c) || c == '_' || c == '-' || c == '.' || c == '*'
}

// sfIsTokenChar reports whether c may continue a Token: a tchar (RFC 9110),
// ':' or '/'.
func sfIsTokenChar(c byte) bool {
	if sfIsAlpha(c) || sfIsDigit(c) {
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~', ':', '/':
		return true
	}
	return false
}
