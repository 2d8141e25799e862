package sfv

import (
	"encoding/base64"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// intValue and strValue are the Integer and String bare items, for comparisons.
func intValue(n int64) Value  { return Value{Kind: Integer, N: n} }
func strValue(s string) Value { return Value{Kind: String, S: s} }

// bytes decodes a Byte Sequence, its text checked by the parser.
func (v Value) bytes() []byte {
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(v.S, "="))
	if err != nil {
		panic("sfv: parser let through byte sequence :" + v.S + ":")
	}
	return b
}

// list serializes items, which the test expects to be serializable.
func list(t testing.TB, items []Member) string {
	t.Helper()
	b, err := AppendList(nil, items)
	if err != nil {
		t.Fatalf("%+v: %v", items, err)
	}
	return string(b)
}

// canonical returns items with every Byte Sequence's text in the form
// the serializer writes (padded), so that a parse of the serialization
// compares equal.
func canonical(items []Member) []Member {
	if items == nil {
		return nil
	}
	out := make([]Member, len(items))
	for i, it := range items {
		out[i] = it
		if it.Kind == ByteSequence {
			out[i].S = base64.StdEncoding.EncodeToString(it.bytes())
		}
		out[i].Inner = canonical(it.Inner)
		if it.Params != nil {
			out[i].Params = make([]Param, len(it.Params))
			for j, p := range it.Params {
				out[i].Params[j] = p
				if p.Kind == ByteSequence {
					out[i].Params[j].S = base64.StdEncoding.EncodeToString(p.bytes())
				}
			}
		}
	}
	return out
}

// truncate returns items cut as ParseList(s, keep) cuts them.
func truncate(items []Member, keep int) []Member {
	if items == nil {
		return nil
	}
	out := make([]Member, min(keep, len(items)))
	for i := range out {
		out[i] = items[i]
		out[i].Inner = truncate(items[i].Inner, keep)
		if len(items[i].Params) > keep {
			out[i].Params = items[i].Params[:keep]
		}
	}
	return out
}

// TestParseList: valid List fields parse to what they say (shown in the
// canonical form the serializer writes); invalid ones are rejected with
// the byte at fault.
func TestParseList(t *testing.T) {
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
		items, err := ParseList(tc.in, math.MaxInt)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if got := list(t, items); got != tc.want {
			t.Errorf("%q parsed as %q, want %q", tc.in, got, tc.want)
		}
	}

	items, err := ParseList(`"say \"hi\" \\ now";k=tok, %"f%c3%bc"`, math.MaxInt)
	if err != nil || items[0].Value != strValue(`say "hi" \ now`) || items[1].S != "fü" {
		t.Errorf("unescaped: %+v, %v", items, err)
	}
	if v, _ := items[0].Param("k"); v != (Value{Kind: Token, S: "tok"}) {
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
		_, err := ParseList(tc.in, math.MaxInt)
		var se *Error
		if !errors.As(err, &se) {
			t.Errorf("%q: got %v, want an *Error", tc.in, err)
			continue
		}
		if se.at != tc.at {
			t.Errorf("%q: error at byte %d, want %d: %v", tc.in, se.at, tc.at, err)
		}
	}
}

// TestParseListKeep: members, parameters and inner-list members past keep
// are checked, then dropped.
func TestParseListKeep(t *testing.T) {
	const in = `a;p=1;q=2;r=3, (1 2 3);s, c, d`
	items, err := ParseList(in, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := list(t, items), `a;p=1;q=2, (1 2);s`; got != want {
		t.Errorf("keep 2: %q, want %q", got, want)
	}
	if _, err := ParseList(in+`, "e`, 2); err == nil {
		t.Error("an invalid member past keep was let through")
	}
}

// FuzzParseList feeds arbitrary field values to the parser, which reads
// untrusted upstream headers: it never panics; what it rejects it rejects
// with an error at a byte of the value; what it accepts serializes to a
// value that parses to the same List, and serializes again unchanged; and
// a parse with keep is the full parse cut at keep.
func FuzzParseList(f *testing.F) {
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
		items, err := ParseList(s, math.MaxInt)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) || se.at < 0 || se.at > len(s) || err.Error() == "" {
				t.Fatalf("%q: error %v", s, err)
			}
			return
		}
		out := []byte(list(t, items))
		again, err := ParseList(string(out), math.MaxInt)
		if err != nil {
			t.Fatalf("%q serialized as %q, which does not parse: %v", s, out, err)
		}
		if !reflect.DeepEqual(again, canonical(items)) {
			t.Fatalf("%q serialized as %q, which parses to %+v, not %+v", s, out, again, items)
		}
		if out2 := []byte(list(t, again)); string(out2) != string(out) {
			t.Fatalf("%q serialized as %q, then as %q", s, out, out2)
		}
		keep = 1 + keep&15
		kept, err := ParseList(s, keep)
		if err != nil || !reflect.DeepEqual(kept, truncate(items, keep)) {
			t.Fatalf("%q with keep %d: %+v, %v; want %+v", s, keep, kept, err, truncate(items, keep))
		}
	})
}

// TestDates: RFC 9651 Dates (section 3.3.7), which the vendored suite does
// not cover: an '@' and an Integer, in range, as an item, a parameter and
// a dictionary member; they serialize as they are written.
func TestDates(t *testing.T) {
	for _, s := range []string{`@1659578233`, `@-1659578233`, `@0`, `@999999999999999`, `@1659578233;a=@1`} {
		m, err := ParseItem(s, math.MaxInt)
		if err != nil || m.Kind != Date {
			t.Errorf("%q: %+v, %v", s, m, err)
			continue
		}
		if out, err := AppendItem(nil, m); err != nil || string(out) != s {
			t.Errorf("%q serialized as %q, %v", s, out, err)
		}
	}
	d, err := ParseDictionary(`a=@1, b=@-2;c`, math.MaxInt)
	if err != nil || len(d) != 2 || d[0].Value != (Value{Kind: Date, N: 1}) || d[1].Value != (Value{Kind: Date, N: -2}) {
		t.Errorf("dictionary of dates: %+v, %v", d, err)
	}
	for _, s := range []string{`@`, `@ 1`, `@1.5`, `@1234567890123456`, `@-`, `@a`, `@@1`, `@1 2`} {
		if m, err := ParseItem(s, math.MaxInt); err == nil {
			t.Errorf("%q parsed as %+v, must fail", s, m)
		}
	}
	if out, err := AppendItem(nil, Member{Value: Value{Kind: Date, N: MaxInteger + 1}}); err == nil {
		t.Errorf("a date out of range serialized as %q", out)
	}
}
