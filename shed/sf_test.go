package shed

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// A small RFC 9651 (Structured Field Values) List parser, to check that the
// header fields the package writes are valid, independently of the writer.

type sfParam struct {
	key string
	val any
}

type sfItem struct {
	val    any // int64, float64, string (sf string), sfToken, []byte, bool, []sfItem (inner list)
	params []sfParam
}

type sfToken string

func (it sfItem) param(k string) (any, bool) {
	for _, p := range it.params {
		if p.key == k {
			return p.val, true
		}
	}
	return nil, false
}

type sfParser struct {
	s string
	i int
}

func (p *sfParser) fail(format string, args ...any) error {
	return fmt.Errorf("sf: at %d of %q: %s", p.i, p.s, fmt.Sprintf(format, args...))
}

func (p *sfParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *sfParser) sp() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *sfParser) ows() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// parseSFList parses a whole List field value (RFC 9651 section 4.2.1).
func parseSFList(s string) ([]sfItem, error) {
	p := &sfParser{s: s}
	p.sp()
	var out []sfItem
	for p.i < len(p.s) {
		var it sfItem
		var err error
		if p.peek() == '(' {
			it, err = p.innerList()
		} else {
			it, err = p.item()
		}
		if err != nil {
			return nil, err
		}
		out = append(out, it)
		p.ows()
		if p.i == len(p.s) {
			return out, nil
		}
		if p.peek() != ',' {
			return nil, p.fail("expected ','")
		}
		p.i++
		p.ows()
		if p.i == len(p.s) {
			return nil, p.fail("trailing comma")
		}
	}
	return out, nil
}

func (p *sfParser) innerList() (sfItem, error) {
	p.i++ // (
	var items []sfItem
	for {
		p.sp()
		if p.peek() == ')' {
			p.i++
			params, err := p.params()
			return sfItem{val: items, params: params}, err
		}
		it, err := p.item()
		if err != nil {
			return sfItem{}, err
		}
		items = append(items, it)
		if c := p.peek(); c != ' ' && c != ')' {
			return sfItem{}, p.fail("bad inner list")
		}
	}
}

func (p *sfParser) item() (sfItem, error) {
	v, err := p.bareItem()
	if err != nil {
		return sfItem{}, err
	}
	params, err := p.params()
	return sfItem{val: v, params: params}, err
}

func (p *sfParser) params() ([]sfParam, error) {
	var out []sfParam
	for p.peek() == ';' {
		p.i++
		p.sp()
		k, err := p.key()
		if err != nil {
			return nil, err
		}
		var v any = true
		if p.peek() == '=' {
			p.i++
			if v, err = p.bareItem(); err != nil {
				return nil, err
			}
		}
		out = append(out, sfParam{k, v})
	}
	return out, nil
}

func (p *sfParser) key() (string, error) {
	start := p.i
	c := p.peek()
	if !(c >= 'a' && c <= 'z' || c == '*') {
		return "", p.fail("bad key start")
	}
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '*' {
			p.i++
			continue
		}
		break
	}
	return p.s[start:p.i], nil
}

func (p *sfParser) bareItem() (any, error) {
	c := p.peek()
	switch {
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == '"':
		return p.str()
	case c == ':':
		p.i++
		end := strings.IndexByte(p.s[p.i:], ':')
		if end < 0 {
			return nil, p.fail("unterminated byte sequence")
		}
		b := []byte(p.s[p.i : p.i+end])
		p.i += end + 1
		return b, nil
	case c == '?':
		p.i++
		switch p.peek() {
		case '0':
			p.i++
			return false, nil
		case '1':
			p.i++
			return true, nil
		}
		return nil, p.fail("bad boolean")
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '*':
		start := p.i
		p.i++
		for p.i < len(p.s) && isTChar(p.s[p.i]) || p.i < len(p.s) && (p.s[p.i] == ':' || p.s[p.i] == '/') {
			p.i++
		}
		return sfToken(p.s[start:p.i]), nil
	}
	return nil, p.fail("bad bare item %q", c)
}

func isTChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func (p *sfParser) number() (any, error) {
	start := p.i
	if p.peek() == '-' {
		p.i++
	}
	digits, dot := 0, -1
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c >= '0' && c <= '9' {
			digits++
			p.i++
			continue
		}
		if c == '.' && dot < 0 {
			dot = digits
			p.i++
			continue
		}
		break
	}
	if digits == 0 {
		return nil, p.fail("no digits")
	}
	text := p.s[start:p.i]
	if dot < 0 {
		if digits > 15 {
			return nil, p.fail("integer too long")
		}
		return strconv.ParseInt(text, 10, 64)
	}
	if dot > 12 || digits-dot > 3 || digits == dot {
		return nil, p.fail("bad decimal")
	}
	return strconv.ParseFloat(text, 64)
}

func (p *sfParser) str() (any, error) {
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\\':
			if p.i == len(p.s) {
				return nil, p.fail("dangling escape")
			}
			e := p.s[p.i]
			p.i++
			if e != '"' && e != '\\' {
				return nil, p.fail("bad escape")
			}
			b.WriteByte(e)
		case c == '"':
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return nil, p.fail("bad string byte")
		default:
			b.WriteByte(c)
		}
	}
	return nil, p.fail("unterminated string")
}

func TestSFParser(t *testing.T) {
	good := map[string]int{
		`"burst";q=100;w=60, "daily";q=1000;w=86400`: 2,
		`"a";r=0;t=1`:             1,
		`tok;x=?1, (1 2);y=:AA=:`: 2,
		`1.5, -3`:                 2,
	}
	for s, n := range good {
		items, err := parseSFList(s)
		if err != nil || len(items) != n {
			t.Errorf("%s: %v, %d items", s, err, len(items))
		}
	}
	for _, s := range []string{`"a`, `"a";`, `"a",`, `"a";q=1234567890123456`, `"a" "b"`, `"\x"`, `"a";Q=1`} {
		if _, err := parseSFList(s); err == nil {
			t.Errorf("%s parsed", s)
		}
	}
}
