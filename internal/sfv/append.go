package sfv

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// AppendString appends s as a String (RFC 9651 section 4.1.6): quoted,
// with backslash and double quote escaped. The caller guarantees that s is
// printable ASCII (0x20 to 0x7e), which is all a String may hold; it is
// not checked here, so that the response hot path does not pay for it.
//
// For printable ASCII the escaping is also exactly that of a JSON string
// (RFC 8259 section 7: only '"', '\' and control characters must be
// escaped, and printable ASCII holds no control character), so shed uses
// it for rule names in JSON problem bodies too. It is not a JSON encoder
// for other input: JSON escapes control characters as \u00XX, while a
// String cannot hold them at all.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			dst = append(dst, '\\')
		}
		dst = append(dst, s[i])
	}
	return append(dst, '"')
}

// AppendInteger appends v as an Integer, clamped into -MaxInteger ..
// MaxInteger: shed sends figures (seconds, counts) whose clamped values no
// client can tell apart (over 31 million years in seconds); a caller that
// must reject such values checks them first.
func AppendInteger(dst []byte, v int64) []byte {
	return strconv.AppendInt(dst, min(max(v, -MaxInteger), MaxInteger), 10)
}

// errSerialize is the error of every value that cannot be serialized.
var errSerialize = errors.New("sfv: value cannot be serialized")

// AppendList appends ms as a List (RFC 9651 section 4.1.1). It returns an
// error, and dst unchanged, when a member cannot be serialized.
func AppendList(dst []byte, ms []Member) ([]byte, error) {
	out := dst
	for i, m := range ms {
		if i > 0 {
			out = append(out, ", "...)
		}
		var err error
		if out, err = appendMember(out, m); err != nil {
			return dst, err
		}
	}
	return out, nil
}

// AppendDictionary appends ms as a Dictionary (section 4.1.2): a Boolean
// true member is written as its key alone. It returns an error, and dst
// unchanged, when a member cannot be serialized.
func AppendDictionary(dst []byte, ms []DictMember) ([]byte, error) {
	out := dst
	for i, m := range ms {
		if i > 0 {
			out = append(out, ", "...)
		}
		var err error
		if out, err = appendKey(out, m.Key); err != nil {
			return dst, err
		}
		if m.Kind == Boolean && m.N == 1 {
			out, err = appendParams(out, m.Params)
		} else {
			out, err = appendMember(append(out, '='), m.Member)
		}
		if err != nil {
			return dst, err
		}
	}
	return out, nil
}

// AppendItem appends m, which must not be an Inner List, as an Item
// (section 4.1.3). It returns an error, and dst unchanged, when m cannot
// be serialized.
func AppendItem(dst []byte, m Member) ([]byte, error) {
	if m.Kind == InnerList {
		return dst, fmt.Errorf("%w: an inner list is not an item", errSerialize)
	}
	out, err := appendMember(dst, m)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// appendMember appends an Item or an Inner List with its parameters.
func appendMember(dst []byte, m Member) ([]byte, error) {
	var err error
	if m.Kind == InnerList {
		dst = append(dst, '(')
		for i, in := range m.Inner {
			if i > 0 {
				dst = append(dst, ' ')
			}
			if in.Kind == InnerList {
				return dst, fmt.Errorf("%w: an inner list inside an inner list", errSerialize)
			}
			if dst, err = appendMember(dst, in); err != nil {
				return dst, err
			}
		}
		dst = append(dst, ')')
	} else if dst, err = AppendBareItem(dst, m.Value); err != nil {
		return dst, err
	}
	return appendParams(dst, m.Params)
}

// appendParams appends parameters (section 4.1.1.2): a Boolean true is
// written as its key alone.
func appendParams(dst []byte, ps []Param) ([]byte, error) {
	var err error
	for _, p := range ps {
		if dst, err = appendKey(append(dst, ';'), p.Key); err != nil {
			return dst, err
		}
		if p.Kind == Boolean && p.N == 1 {
			continue
		}
		if dst, err = AppendBareItem(append(dst, '='), p.Value); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// appendKey appends a Key (section 4.1.1.3).
func appendKey(dst []byte, k string) ([]byte, error) {
	if k == "" || !(isLower(k[0]) || k[0] == '*') {
		return dst, fmt.Errorf("%w: key %q must start with a lowercase letter or '*'", errSerialize, k)
	}
	for i := 1; i < len(k); i++ {
		if !isKeyChar(k[i]) {
			return dst, fmt.Errorf("%w: key %q holds %q", errSerialize, k, k[i])
		}
	}
	return append(dst, k...), nil
}

// AppendBareItem appends v (section 4.1.3.1). It returns an error when v
// has no valid serialization: an Integer, Date or Decimal out of range, a
// String outside printable ASCII, an invalid Token, a Byte Sequence that is
// not base64, a Boolean other than 0 or 1, a Display String that is not
// UTF-8, or no kind. A Byte Sequence is written with padding, whatever
// form its text had.
func AppendBareItem(dst []byte, v Value) ([]byte, error) {
	switch v.Kind {
	case Integer, Date:
		if v.N < -MaxInteger || v.N > MaxInteger {
			return dst, fmt.Errorf("%w: integer %d has more than 15 digits", errSerialize, v.N)
		}
		if v.Kind == Date {
			dst = append(dst, '@')
		}
		return strconv.AppendInt(dst, v.N, 10), nil
	case Decimal:
		if v.N < -MaxDecimal || v.N > MaxDecimal {
			return dst, fmt.Errorf("%w: decimal %d/1000 has more than 12 integer digits", errSerialize, v.N)
		}
		n := v.N
		if n < 0 {
			dst = append(dst, '-')
			n = -n
		}
		dst = strconv.AppendInt(dst, n/1000, 10)
		dst = append(dst, '.')
		frac := n % 1000
		dst = append(dst, byte('0'+frac/100))
		if frac%100 != 0 {
			dst = append(dst, byte('0'+frac/10%10))
			if frac%10 != 0 {
				dst = append(dst, byte('0'+frac%10))
			}
		}
		return dst, nil
	case String:
		for i := 0; i < len(v.S); i++ {
			if c := v.S[i]; c < 0x20 || c > 0x7e {
				return dst, fmt.Errorf("%w: string holds byte %#x outside printable ASCII", errSerialize, c)
			}
		}
		return AppendString(dst, v.S), nil
	case Token:
		if v.S == "" || !(isAlpha(v.S[0]) || v.S[0] == '*') {
			return dst, fmt.Errorf("%w: token %q must start with a letter or '*'", errSerialize, v.S)
		}
		for i := 1; i < len(v.S); i++ {
			if !isTokenChar(v.S[i]) {
				return dst, fmt.Errorf("%w: token %q holds %q", errSerialize, v.S, v.S[i])
			}
		}
		return append(dst, v.S...), nil
	case ByteSequence:
		b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(v.S, "="))
		if err != nil {
			return dst, fmt.Errorf("%w: byte sequence: %v", errSerialize, err)
		}
		dst = append(dst, ':')
		dst = base64.StdEncoding.AppendEncode(dst, b)
		return append(dst, ':'), nil
	case Boolean:
		if v.N != 0 && v.N != 1 {
			return dst, fmt.Errorf("%w: boolean %d", errSerialize, v.N)
		}
		return append(dst, '?', byte('0'+v.N)), nil
	case DisplayString:
		if !utf8.ValidString(v.S) {
			return dst, fmt.Errorf("%w: display string is not UTF-8", errSerialize)
		}
		dst = append(dst, '%', '"')
		for i := 0; i < len(v.S); i++ {
			if c := v.S[i]; c == '%' || c == '"' || c < 0x20 || c > 0x7e {
				dst = append(dst, '%', lowerHex[c>>4], lowerHex[c&15])
			} else {
				dst = append(dst, c)
			}
		}
		return append(dst, '"'), nil
	}
	return dst, fmt.Errorf("%w: no bare item of kind %d", errSerialize, v.Kind)
}

const lowerHex = "0123456789abcdef"
