package shed

import (
	"encoding/base64"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// sfInt and sfStr are the Integer and String bare items, for comparisons.
func sfInt(n int64) sfValue  { return sfValue{kind: sfInteger, n: n} }
func sfStr(s string) sfValue { return sfValue{kind: sfString, s: s} }

// bytes decodes a Byte Sequence, its text checked by the parser.
func (v sfValue) bytes() []byte {
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(v.s, "="))
	if err != nil {
		panic("shed: parser let through byte sequence :" + v.s + ":")
	}
	return b
}

// appendSFList appends items serialized by RFC 9651 section 4.1, which
// writes every value in one canonical form.
func appendSFList(dst []byte, items []sfItem) []byte {
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = appendSFMember(dst, it)
	}
	return dst
}

func appendSFMember(dst []byte, it sfItem) []byte {
	if it.kind == sfInnerList {
		dst = append(dst, '(')
		for i, m := range it.inner {
			if i > 0 {
				dst = append(dst, ' ')
			}
			dst = appendSFMember(dst, m)
		}
		dst = append(dst, ')')
	} else {
		dst = appendSFBareItem(dst, it.sfValue)
	}
	for _, p := range it.params {
		dst = append(dst, ';')
		dst = append(dst, p.key...)
		if p.sfValue != (sfValue{kind: sfBoolean, n: 1}) {
			dst = append(dst, '=')
			dst = appendSFBareItem(dst, p.sfValue)
		}
	}
	return dst
}

func appendSFBareItem(dst []byte, v sfValue) []byte {
	switch v.kind {
	case sfInteger:
		return strconv.AppendInt(dst, v.n, 10)
	case sfDecimal:
		n := v.n
		if n < 0 {
			dst = append(dst, '-')
			n = -n
		}
		dst = strconv.AppendInt(dst, n/1000, 10)
		frac := strings.TrimRight(strconv.FormatInt(1000+n%1000, 10)[1:], "0")
		if frac == "" {
			frac = "0"
		}
		return append(append(dst, '.'), frac...)
	case sfString:
		return appendSFString(dst, v.s)
	case sfToken:
		return append(dst, v.s...)
	case sfByteSequence:
		dst = append(dst, ':')
		dst = base64.StdEncoding.AppendEncode(dst, v.bytes())
		return append(dst, ':')
	case sfBoolean:
		return append(dst, '?', byte('0'+v.n))
	case sfDate:
		return strconv.AppendInt(append(dst, '@'), v.n, 10)
	case sfDisplayString:
		dst = append(dst, '%', '"')
		for i := 0; i < len(v.s); i++ {
			if c := v.s[i]; c == '%' || c == '"' || c < 0x20 || c > 0x7e {
				dst = append(dst, '%', "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
			} else {
				dst = append(dst, c)
			}
		}
		return append(dst, '"')
	}
	panic("shed: no bare item of kind " + strconv.Itoa(int(v.kind)))
}

// sfCanonical returns items with every Byte Sequence's text in the form
// the serializer writes (padded), so that a parse of the serialization
// compares equal.
func sfCanonical(items []sfItem) []sfItem {
	if items == nil {
		return nil
	}
	out := make([]sfItem, len(items))
	for i, it := range items {
		out[i] = it
		if it.kind == sfByteSequence {
			out[i].s = base64.StdEncoding.EncodeToString(it.bytes())
		}
		out[i].inner = sfCanonical(it.inner)
		if it.params != nil {
			out[i].params = make([]sfParam, len(it.params))
			for j, p := range it.params {
				out[i].params[j] = p
				if p.kind == sfByteSequence {
					out[i].params[j].s = base64.StdEncoding.EncodeToString(p.bytes())
				}
			}
		}
	}
	return out
}

// sfTruncate returns items cut as parseSFList(s, keep) cuts them.
func sfTruncate(items []sfItem, keep int) []sfItem {
	if items == nil {
		return nil
	}
	out := make([]sfItem, min(keep, len(items)))
	for i := range out {
		out[i] = items[i]
		out[i].inner = sfTruncate(items[i].inner, keep)
		if len(items[i].params) > keep {
			out[i].params = items[i].params[:keep]
		}
	}
	return out
}

// TestSFParser: valid List fields parse to what they say (shown in the
// canonical form the serializer writes); invalid ones are rejected with
// the byte at fault.
func TestSFParser(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`"burst";q=100;w=60, "daily";q=1000;w=86400`, `"burst";q=100;w=60, "daily";q=1000;w=86400`},
		{`"a";r=0;t=1`, `"a";r=0;t=1`},
		{`tok;x=?1, (1 2);y=:AA=:`, `tok;x, (1 2);y=:AA==:`},
		{`1.5, -3`, `1.5, -3`},
		// Empty lists, and the spaces around members.
		{``, ``},
		{`   `, ``},
		{`  a,b ,c	,	d  `, `a, b, c, d`},
		{"a\t", `a`},
		// Numbers: 15 integer digits, 12.3 decimal ones; leading zeros.
		{`999999999999999, -999999999999999`, `999999999999999, -999999999999999`},
		{`999999999999.999, -0.001, 1.0, 1.500, 007, -0`, `999999999999.999, -0.001, 1.0, 1.5, 7, 0`},
		// Strings, escaped quotes and backslashes included.
		{`"say \"hi\" \\ now", "", " ~ "`, `"say \"hi\" \\ now", "", " ~ "`},
		// Tokens, with the characters tokens may continue with.
		{"*, foo/bar:baz, A!#$%&'*+-.^_`|~9", "*, foo/bar:baz, A!#$%&'*+-.^_`|~9"},
		// Parameters: on bare tokens, keys of every allowed character,
		// Boolean true written bare, SP after ';', repeated keys as sent.
		{`tok;a=1;b;c=?0, x;*k_-.9=tok;y="s"`, `tok;a=1;b;c=?0, x;*k_-.9=tok;y="s"`},
		{`a; x=1;x=2;y=?1`, `a;x=1;x=2;y`},
		// Byte sequences: padded, unpadded, empty.
		{`:aGVsbG8=:, :aGVsbG8:, ::, :/+Ah:`, `:aGVsbG8=:, :aGVsbG8=:, ::, :/+Ah:`},
		// Inner lists: empty, spaced, with parameters inside and out.
		{`(), ( 1  2 ), (a;x=1 "b");y=@-5`, `(), (1 2), (a;x=1 "b");y=@-5`},
		// Dates and Display Strings (RFC 9651's additions).
		{`@1659578233, %"f%c3%bc%c3%bc", %"50%25 %22q%22"`, `@1659578233, %"f%c3%bc%c3%bc", %"50%25 %22q%22"`},
	} {
		items, err := parseSFList(tc.in, math.MaxInt)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if got := string(appendSFList(nil, items)); got != tc.want {
			t.Errorf("%q parsed as %q, want %q", tc.in, got, tc.want)
		}
	}

	items, err := parseSFList(`"say \"hi\" \\ now";k=tok, %"f%c3%bc"`, math.MaxInt)
	if err != nil || items[0].sfValue != sfStr(`say "hi" \ now`) || items[1].s != "fü" {
		t.Errorf("unescaped: %+v, %v", items, err)
	}
	if v, _ := items[0].param("k"); v != (sfValue{kind: sfToken, s: "tok"}) {
		t.Errorf("param k = %+v", v)
	}

	for _, tc := range []struct {
		in string
		at int // the byte the error names
	}{
		{`"a`, 0},
		{`"a";`, 4},
		{`"a",`, 4},
		{`"a", `, 5},
		{`,`, 0},
		{`"a";q=1234567890123456`, 21},
		{`-9999999999999999`, 16},
		{`1234567890123.5`, 13},
		{`1.2345`, 5},
		{`1.`, 1},
		{`-`, 1},
		{`-.5`, 1},
		{`1.2.3`, 3},
		{`"a" "b"`, 4},
		{`"\x"`, 1},
		{`"\`, 1},
		{`"é"`, 1},
		{`"a";Q=1`, 4},
		{`"a";1x=1`, 4},
		{`a ;x=1`, 2},
		{`a;x =1`, 4},
		{"\ta", 0},
		{`a, <b>`, 3},
		{`?2`, 1},
		{`:a=GVsbG8=:`, 3},
		{`:aGVsbG8=`, 0},
		{`:aGVsb G8=:`, 6},
		{`:_-Ah:`, 1},
		{`:A:`, 1},
		{`:AAAA=:`, 1},
		{`(1,2)`, 2},
		{`(1`, 0},
		{`(1 (2))`, 3},
		{`@1.5`, 1},
		{`@`, 1},
		{`%a`, 0},
		{`%"%C3%BC"`, 2},
		{`%"%ff"`, 0},
		{`%"ü"`, 2},
		{`%"abc`, 0},
	} {
		_, err := parseSFList(tc.in, math.MaxInt)
		var se *sfError
		if !errors.As(err, &se) {
			t.Errorf("%q: got %v, want an *sfError", tc.in, err)
			continue
		}
		if se.at != tc.at {
			t.Errorf("%q: error at byte %d, want %d: %v", tc.in, se.at, tc.at, err)
		}
	}
}

// TestSFParserKeep: members, parameters and inner-list members past keep
// are checked, then dropped.
func TestSFParserKeep(t *testing.T) {
	const in = `a;p=1;q=2;r=3, (1 2 3);s, c, d`
	items, err := parseSFList(in, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(appendSFList(nil, items)), `a;p=1;q=2, (1 2);s`; got != want {
		t.Errorf("keep 2: %q, want %q", got, want)
	}
	if _, err := parseSFList(in+`, "e`, 2); err == nil {
		t.Error("an invalid member past keep was let through")
	}
}

// FuzzSFList feeds arbitrary field values to the parser, which reads
// untrusted upstream headers: it never panics; what it rejects it rejects
// with an error at a byte of the value; what it accepts serializes to a
// value that parses to the same List, and serializes again unchanged; and
// a parse with keep is the full parse cut at keep.
func FuzzSFList(f *testing.F) {
	for _, s := range []string{
		`"burst";q=100;w=60, "daily";q=1000;w=86400`,
		`"burst";r=50;t=30, "daily";r=999;t=3600`,
		`tok;x=?1, (1 2);y=:AA=:`,
		`1.5, -3, 999999999999999, -999999999999.999`,
		`"say \"hi\" \\ now", *, foo/bar:baz`,
		`(a;x=1 "b");y=@-5, %"f%c3%bc"`,
		`a, b,`,
		`"a";q=1234567890123456`,
		`:a=GVsbG8=:`,
		"  a,\tb  ",
	} {
		f.Add(s, 2)
	}
	f.Fuzz(func(t *testing.T, s string, keep int) {
		items, err := parseSFList(s, math.MaxInt)
		if err != nil {
			var se *sfError
			if !errors.As(err, &se) || se.at < 0 || se.at > len(s) || err.Error() == "" {
				t.Fatalf("%q: error %v", s, err)
			}
			return
		}
		out := appendSFList(nil, items)
		again, err := parseSFList(string(out), math.MaxInt)
		if err != nil {
			t.Fatalf("%q serialized as %q, which does not parse: %v", s, out, err)
		}
		if !reflect.DeepEqual(again, sfCanonical(items)) {
			t.Fatalf("%q serialized as %q, which parses to %+v, not %+v", s, out, again, items)
		}
		if out2 := appendSFList(nil, again); string(out2) != string(out) {
			t.Fatalf("%q serialized as %q, then as %q", s, out, out2)
		}
		keep = 1 + keep&15
		kept, err := parseSFList(s, keep)
		if err != nil || !reflect.DeepEqual(kept, sfTruncate(items, keep)) {
			t.Fatalf("%q with keep %d: %+v, %v; want %+v", s, keep, kept, err, sfTruncate(items, keep))
		}
	})
}
