package sfv

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// ParseList parses s, a List field value, by the rules of RFC 9651
// (sections 4.2 and 4.2.1), all its types included. It keeps the first keep
// (at least 1) members of the list, and of each member the first keep
// parameters and inner-list members; the rest are checked, then dropped, so
// that a hostile field costs bounded memory. A blank s is the empty List.
// For a value that is not a valid List it returns an *Error that says
// what is wrong where. Strings without escapes and Tokens are pieces of s,
// not copies.
func ParseList(s string, keep int) ([]Member, error) {
	p := newParser(s, keep)
	p.skipSP()
	if p.i == len(s) {
		return nil, nil
	}
	items := make([]Member, 0, min(keep, strings.Count(s, ",")+1))
	for {
		store := len(items) < keep
		it, err := p.member(store)
		if err != nil {
			return nil, err
		}
		if store {
			items = append(items, it)
		}
		if done, err := p.next(); done || err != nil {
			return items, err
		}
	}
}

// ParseDictionary parses s, a Dictionary field value (RFC 9651 section
// 4.2.2), keeping members and their parameters as ParseList does. Members
// come in the order sent, a repeated key included (the last one is the
// value RFC 9651 gives the key). A blank s is the empty Dictionary.
func ParseDictionary(s string, keep int) ([]DictMember, error) {
	p := newParser(s, keep)
	p.skipSP()
	if p.i == len(s) {
		return nil, nil
	}
	members := make([]DictMember, 0, min(keep, strings.Count(s, ",")+1))
	for {
		store := len(members) < keep
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		var m Member
		if p.i < len(p.in) && p.in[p.i] == '=' {
			p.i++
			m, err = p.member(store)
		} else {
			m.Value = Value{Kind: Boolean, N: 1}
			m.Params, err = p.parameters(store)
		}
		if err != nil {
			return nil, err
		}
		if store {
			members = append(members, DictMember{Key: key, Member: m})
		}
		if done, err := p.next(); done || err != nil {
			return members, err
		}
	}
}

// ParseItem parses s, an Item field value (RFC 9651 section 4.2.3),
// keeping at most keep of its parameters.
func ParseItem(s string, keep int) (Member, error) {
	p := newParser(s, keep)
	p.skipSP()
	m, err := p.item(true)
	if err != nil {
		return Member{}, err
	}
	p.skipSP()
	if p.i != len(s) {
		return Member{}, p.fail("unexpected text after the item")
	}
	return m, nil
}

// parser is the state of one parse: the input, the position in it, and
// the backing arrays all members' parameters and inner lists are cut from.
type parser struct {
	in   string
	i    int
	keep int
	pbuf []Param
	ibuf []Member
}

// newParser returns a parser of s keeping keep of everything (at least 1).
// Semicolons bound how many parameters s holds (strings may hold some
// too): the parameters take one allocation, up to 64 of them.
func newParser(s string, keep int) parser {
	keep = max(keep, 1)
	return parser{in: s, keep: keep, pbuf: make([]Param, 0, min(strings.Count(s, ";"), 64))}
}

// next moves past the ',' between two members of a List or Dictionary,
// with the whitespace around it. It reports true at the end of the input.
func (p *parser) next() (bool, error) {
	p.skipOWS()
	if p.i == len(p.in) {
		return true, nil
	}
	if p.in[p.i] != ',' {
		return false, p.fail("expected ',' after a member")
	}
	p.i++
	p.skipOWS()
	if p.i == len(p.in) {
		return false, p.fail("trailing ',' ends the field")
	}
	return false, nil
}

func (p *parser) fail(msg string) error { return p.failAt(p.i, msg) }

func (p *parser) failAt(at int, msg string) error {
	return &Error{field: p.in, at: at, msg: msg}
}

func (p *parser) skipSP() {
	for p.i < len(p.in) && p.in[p.i] == ' ' {
		p.i++
	}
}

func (p *parser) skipOWS() {
	for p.i < len(p.in) && (p.in[p.i] == ' ' || p.in[p.i] == '\t') {
		p.i++
	}
}

// member parses an Item or an Inner List (section 4.2.1.1); store false
// checks it without keeping its parameters or inner-list members.
func (p *parser) member(store bool) (Member, error) {
	if p.i < len(p.in) && p.in[p.i] == '(' {
		return p.innerList(store)
	}
	return p.item(store)
}

// innerList parses an Inner List (section 4.2.1.2).
func (p *parser) innerList(store bool) (Member, error) {
	open := p.i
	p.i++ // '('
	start, n := len(p.ibuf), 0
	for {
		p.skipSP()
		if p.i == len(p.in) {
			return Member{}, p.failAt(open, "inner list has no closing ')'")
		}
		if p.in[p.i] == ')' {
			p.i++
			it := Member{Value: Value{Kind: InnerList}}
			if len(p.ibuf) > start {
				it.Inner = p.ibuf[start:len(p.ibuf):len(p.ibuf)]
			}
			var err error
			it.Params, err = p.parameters(store)
			return it, err
		}
		keepIt := store && n < p.keep
		it, err := p.item(keepIt)
		if err != nil {
			return Member{}, err
		}
		if keepIt {
			p.ibuf = append(p.ibuf, it)
		}
		n++
		if p.i < len(p.in) && p.in[p.i] != ' ' && p.in[p.i] != ')' {
			return Member{}, p.fail("expected ' ' or ')' after an inner-list member")
		}
	}
}

// item parses an Item (section 4.2.3).
func (p *parser) item(store bool) (Member, error) {
	v, err := p.bareItem()
	if err != nil {
		return Member{}, err
	}
	params, err := p.parameters(store)
	return Member{Value: v, Params: params}, err
}

// parameters parses Parameters (section 4.2.3.2), keeping them in the
// order sent.
func (p *parser) parameters(store bool) ([]Param, error) {
	start, n := len(p.pbuf), 0
	for p.i < len(p.in) && p.in[p.i] == ';' {
		p.i++
		p.skipSP()
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		v := Value{Kind: Boolean, N: 1}
		if p.i < len(p.in) && p.in[p.i] == '=' {
			p.i++
			if v, err = p.bareItem(); err != nil {
				return nil, err
			}
		}
		if store && n < p.keep {
			p.pbuf = append(p.pbuf, Param{Key: key, Value: v})
		}
		n++
	}
	if len(p.pbuf) == start {
		return nil, nil
	}
	return p.pbuf[start:len(p.pbuf):len(p.pbuf)], nil
}

// key parses a Key (section 4.2.3.3).
func (p *parser) key() (string, error) {
	start := p.i
	if p.i == len(p.in) || !(isLower(p.in[p.i]) || p.in[p.i] == '*') {
		return "", p.fail("expected a key (a lowercase letter or '*')")
	}
	for p.i < len(p.in) && isKeyChar(p.in[p.i]) {
		p.i++
	}
	return p.in[start:p.i], nil
}

// bareItem parses a Bare Item (section 4.2.3.1).
func (p *parser) bareItem() (Value, error) {
	if p.i == len(p.in) {
		return Value{}, p.fail("expected an item, found the end")
	}
	switch c := p.in[p.i]; {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		return p.str()
	case isAlpha(c) || c == '*':
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
	return Value{}, p.fail(fmt.Sprintf("%q cannot start an item", p.in[p.i]))
}

// number parses an Integer or a Decimal (section 4.2.4).
func (p *parser) number() (Value, error) {
	neg := p.in[p.i] == '-'
	if neg {
		p.i++
	}
	if p.i == len(p.in) || !isDigit(p.in[p.i]) {
		return Value{}, p.fail("expected a digit")
	}
	var n int64
	digits, frac := 0, -1 // frac: digits after the '.', -1 for an Integer
	for p.i < len(p.in) {
		c := p.in[p.i]
		if c == '.' && frac < 0 {
			if digits > 12 {
				return Value{}, p.fail("decimal has more than 12 integer digits")
			}
			frac = 0
			p.i++
			continue
		}
		if !isDigit(c) {
			break
		}
		if frac < 0 {
			if digits == 15 {
				return Value{}, p.fail("integer has more than 15 digits")
			}
			digits++
		} else {
			if frac == 3 {
				return Value{}, p.fail("decimal has more than 3 fraction digits")
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
		return Value{Kind: Integer, N: n}, nil
	}
	if frac == 0 {
		return Value{}, p.failAt(p.i-1, "decimal ends in '.'")
	}
	for ; frac < 3; frac++ {
		n *= 10
	}
	return Value{Kind: Decimal, N: n}, nil
}

// str parses a String (section 4.2.5). One without escapes is a piece of
// the field, not a copy.
func (p *parser) str() (Value, error) {
	open := p.i
	p.i++        // '"'
	var b []byte // the unescaped String, once an escape is met
	for p.i < len(p.in) {
		switch c := p.in[p.i]; {
		case c == '"':
			s := p.in[open+1 : p.i]
			if b != nil {
				s = string(b)
			}
			p.i++
			return Value{Kind: String, S: s}, nil
		case c == '\\':
			if p.i+1 == len(p.in) || (p.in[p.i+1] != '"' && p.in[p.i+1] != '\\') {
				return Value{}, p.fail("a backslash in a string escapes only '\"' or '\\'")
			}
			if b == nil {
				b = append([]byte(nil), p.in[open+1:p.i]...)
			}
			b = append(b, p.in[p.i+1])
			p.i += 2
		case c < 0x20 || c > 0x7e:
			return Value{}, p.fail("a string holds printable ASCII only")
		default:
			if b != nil {
				b = append(b, c)
			}
			p.i++
		}
	}
	return Value{}, p.failAt(open, "string has no closing '\"'")
}

// token parses a Token (section 4.2.6).
func (p *parser) token() Value {
	start := p.i
	p.i++
	for p.i < len(p.in) && isTokenChar(p.in[p.i]) {
		p.i++
	}
	return Value{Kind: Token, S: p.in[start:p.i]}
}

// byteSequence parses a Byte Sequence (section 4.2.7). It checks that the
// base64 text decodes, with the padding synthesized where it is missing,
// and keeps the text.
func (p *parser) byteSequence() (Value, error) {
	open := p.i
	p.i++ // ':'
	start, pad := p.i, 0
	for ; p.i < len(p.in) && p.in[p.i] != ':'; p.i++ {
		switch c := p.in[p.i]; {
		case c == '=':
			pad++
		case pad > 0 && (isAlpha(c) || isDigit(c) || c == '+' || c == '/'):
			return Value{}, p.fail("base64 after '=' padding in a byte sequence")
		case !(isAlpha(c) || isDigit(c) || c == '+' || c == '/'):
			return Value{}, p.fail("a byte sequence holds base64 only")
		}
	}
	if p.i == len(p.in) {
		return Value{}, p.failAt(open, "byte sequence has no closing ':'")
	}
	// Four base64 characters carry three bytes; a last group of one
	// character carries none, and padding fills a group up to four.
	if data := p.i - start - pad; data%4 == 1 || pad > (4-data%4)%4 {
		return Value{}, p.failAt(start, "byte sequence is not base64: wrong length or padding")
	}
	v := Value{Kind: ByteSequence, S: p.in[start:p.i]}
	p.i++
	return v, nil
}

// boolean parses a Boolean (section 4.2.8).
func (p *parser) boolean() (Value, error) {
	p.i++ // '?'
	if p.i == len(p.in) || (p.in[p.i] != '0' && p.in[p.i] != '1') {
		return Value{}, p.fail("expected '0' or '1' after '?'")
	}
	v := Value{Kind: Boolean, N: int64(p.in[p.i] - '0')}
	p.i++
	return v, nil
}

// date parses a Date (section 4.2.9).
func (p *parser) date() (Value, error) {
	p.i++ // '@'
	if p.i == len(p.in) || (p.in[p.i] != '-' && !isDigit(p.in[p.i])) {
		return Value{}, p.fail("expected an integer after '@'")
	}
	start := p.i
	v, err := p.number()
	if err != nil {
		return Value{}, err
	}
	if v.Kind != Integer {
		return Value{}, p.failAt(start, "a date is an integer")
	}
	v.Kind = Date
	return v, nil
}

// displayString parses a Display String (section 4.2.10): printable ASCII
// and %xx escapes (lowercase hex) of UTF-8.
func (p *parser) displayString() (Value, error) {
	open := p.i
	if p.i+1 == len(p.in) || p.in[p.i+1] != '"' {
		return Value{}, p.fail(`expected '"' after '%'`)
	}
	p.i += 2
	var b []byte // the decoded string, once an escape is met
	for p.i < len(p.in) {
		switch c := p.in[p.i]; {
		case c == '"':
			s := p.in[open+2 : p.i]
			if b != nil {
				s = string(b)
			}
			if !utf8.ValidString(s) {
				return Value{}, p.failAt(open, "display string is not UTF-8")
			}
			p.i++
			return Value{Kind: DisplayString, S: s}, nil
		case c == '%':
			if p.i+2 >= len(p.in) || !isLowerHex(p.in[p.i+1]) || !isLowerHex(p.in[p.i+2]) {
				return Value{}, p.fail("'%' in a display string starts two lowercase hex digits")
			}
			if b == nil {
				b = append([]byte(nil), p.in[open+2:p.i]...)
			}
			b = append(b, unhex(p.in[p.i+1])<<4|unhex(p.in[p.i+2]))
			p.i += 3
		case c < 0x20 || c > 0x7e:
			return Value{}, p.fail("a display string holds printable ASCII only")
		default:
			if b != nil {
				b = append(b, c)
			}
			p.i++
		}
	}
	return Value{}, p.failAt(open, "display string has no closing '\"'")
}

func isDigit(c byte) bool    { return c >= '0' && c <= '9' }
func isLower(c byte) bool    { return c >= 'a' && c <= 'z' }
func isAlpha(c byte) bool    { return isLower(c) || (c >= 'A' && c <= 'Z') }
func isLowerHex(c byte) bool { return isDigit(c) || (c >= 'a' && c <= 'f') }

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

// isKeyChar reports whether c may continue a key.
func isKeyChar(c byte) bool {
	return isLower(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*'
}

// isTokenChar reports whether c may continue a Token: a tchar (RFC 9110),
// ':' or '/'.
func isTokenChar(c byte) bool {
	if isAlpha(c) || isDigit(c) {
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~', ':', '/':
		return true
	}
	return false
}
