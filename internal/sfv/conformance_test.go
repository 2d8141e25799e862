package sfv

import (
	"bytes"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The httpwg structured-field-tests suite (testdata/structured-field-tests,
// see its README.md) runs against the parsers and the serializer: every
// valid field parses to the expected structure and serializes to its
// canonical form, every invalid one is rejected, every expected structure
// serializes to its canonical form (or, in serialisation-tests, fails to
// when it must).

// suiteCase is one test record of the suite.
type suiteCase struct {
	Name       string          `json:"name"`
	Raw        []string        `json:"raw"`
	HeaderType string          `json:"header_type"`
	Expected   json.RawMessage `json:"expected"`
	MustFail   bool            `json:"must_fail"`
	CanFail    bool            `json:"can_fail"`
	Canonical  []string        `json:"canonical"`
}

func TestConformance(t *testing.T) {
	files, err := filepath.Glob("testdata/structured-field-tests/*.json")
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob("testdata/structured-field-tests/serialisation-tests/*.json")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, more...)
	if len(files) < 15 {
		t.Fatalf("found %d suite files, want the 15 vendored", len(files))
	}
	total := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cases []suiteCase
		if err := json.Unmarshal(b, &cases); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range cases {
			total++
			name := filepath.Base(f) + "/" + tc.Name
			if tc.Raw == nil {
				checkSerialization(t, name, tc)
			} else {
				checkParse(t, name, tc)
			}
		}
	}
	if total != 197 {
		t.Fatalf("ran %d cases, want the 197 of the vendored files", total)
	}
}

// field is a parsed field value of any of the three top-level types.
type field struct {
	list []Member
	dict []DictMember
	item Member
}

func parseField(typ, s string) (field, error) {
	var f field
	var err error
	switch typ {
	case "list":
		f.list, err = ParseList(s, math.MaxInt)
	case "dictionary":
		f.dict, err = ParseDictionary(s, math.MaxInt)
	case "item":
		f.item, err = ParseItem(s, math.MaxInt)
	default:
		err = fmt.Errorf("unknown header type %q", typ)
	}
	return f, err
}

func serializeField(typ string, f field) (string, error) {
	var b []byte
	var err error
	switch typ {
	case "list":
		b, err = AppendList(nil, f.list)
	case "dictionary":
		b, err = AppendDictionary(nil, f.dict)
	default:
		b, err = AppendItem(nil, f.item)
	}
	return string(b), err
}

func checkParse(t *testing.T, name string, tc suiteCase) {
	t.Helper()
	// Several field lines combine into one value, joined by commas.
	got, err := parseField(tc.HeaderType, strings.Join(tc.Raw, ","))
	if tc.MustFail {
		if err == nil {
			t.Errorf("%s: %q parsed, must fail", name, tc.Raw)
		}
		return
	}
	if err != nil {
		if !tc.CanFail {
			t.Errorf("%s: %q: %v", name, tc.Raw, err)
		}
		return
	}
	want, err := expectedField(tc.HeaderType, tc.Expected)
	if err != nil {
		t.Fatalf("%s: expected: %v", name, err)
	}
	if g, w := normalField(got), normalField(want); !reflect.DeepEqual(g, w) {
		t.Errorf("%s: %q parsed as\n %+v\nwant\n %+v", name, tc.Raw, g, w)
	}
	canonical := tc.Raw
	if tc.Canonical != nil {
		canonical = tc.Canonical
	}
	if out, err := serializeField(tc.HeaderType, normalField(got)); err != nil || out != strings.Join(canonical, ", ") {
		t.Errorf("%s: %q serialized as %q (%v), want %q", name, tc.Raw, out, err, canonical)
	}
}

func checkSerialization(t *testing.T, name string, tc suiteCase) {
	t.Helper()
	want, err := expectedField(tc.HeaderType, tc.Expected)
	if err != nil {
		t.Fatalf("%s: expected: %v", name, err)
	}
	out, err := serializeField(tc.HeaderType, want)
	if tc.MustFail {
		if err == nil {
			t.Errorf("%s: serialized as %q, must fail", name, out)
		}
		return
	}
	if err != nil || out != strings.Join(tc.Canonical, ", ") {
		t.Errorf("%s: serialized as %q (%v), want %q", name, out, err, tc.Canonical)
	}
}

// normalField returns f with repeated keys folded as RFC 9651 reads them
// (a later value replaces an earlier one, in the earlier one's place),
// Byte Sequences in padded form and empty slices nil, so that parses and
// expectations compare with reflect.DeepEqual.
func normalField(f field) field {
	var out field
	for _, m := range f.list {
		out.list = append(out.list, normalMember(m))
	}
	for _, d := range f.dict {
		d.Member = normalMember(d.Member)
		if i := indexDict(out.dict, d.Key); i >= 0 {
			out.dict[i] = d
		} else {
			out.dict = append(out.dict, d)
		}
	}
	if f.item.Kind != 0 {
		out.item = normalMember(f.item)
	}
	return out
}

func indexDict(ds []DictMember, key string) int {
	for i, d := range ds {
		if d.Key == key {
			return i
		}
	}
	return -1
}

func normalMember(m Member) Member {
	out := Member{Value: normalValue(m.Value)}
	for _, in := range m.Inner {
		out.Inner = append(out.Inner, normalMember(in))
	}
	for _, p := range m.Params {
		p.Value = normalValue(p.Value)
		i := -1
		for j, q := range out.Params {
			if q.Key == p.Key {
				i = j
			}
		}
		if i >= 0 {
			out.Params[i] = p
		} else {
			out.Params = append(out.Params, p)
		}
	}
	if m.Kind == InnerList && out.Inner == nil {
		out.Inner = nil
	}
	return out
}

func normalValue(v Value) Value {
	if v.Kind == ByteSequence {
		b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(v.S, "="))
		if err == nil {
			v.S = base64.StdEncoding.EncodeToString(b)
		}
	}
	return v
}

// The suite's JSON, read in order: objects become ordered pairs.

type pair struct {
	key string
	val any
}

type object []pair

// decodeOrdered reads one JSON value, keeping the order of object members
// and numbers as written.
func decodeOrdered(d *json.Decoder) (any, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('['):
		arr := []any{}
		for d.More() {
			v, err := decodeOrdered(d)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := d.Token()
		return arr, err
	case json.Delim('{'):
		obj := object{}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeOrdered(d)
			if err != nil {
				return nil, err
			}
			obj = append(obj, pair{k.(string), v})
		}
		_, err := d.Token()
		return obj, err
	}
	return tok, nil
}

// expectedField converts the suite's expected structure: older files
// write parameters and dictionaries as JSON objects, newer ones as arrays
// of [key, value] pairs; both are read.
func expectedField(typ string, raw json.RawMessage) (field, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	v, err := decodeOrdered(d)
	if err != nil {
		return field{}, err
	}
	var f field
	switch typ {
	case "list":
		arr, ok := v.([]any)
		if !ok {
			return f, fmt.Errorf("list is %T", v)
		}
		for _, m := range arr {
			mm, err := expectedMember(m)
			if err != nil {
				return f, err
			}
			f.list = append(f.list, mm)
		}
	case "dictionary":
		pairs, err := expectedPairs(v)
		if err != nil {
			return f, err
		}
		for _, p := range pairs {
			mm, err := expectedMember(p.val)
			if err != nil {
				return f, err
			}
			f.dict = append(f.dict, DictMember{Key: p.key, Member: mm})
		}
	default:
		f.item, err = expectedMember(v)
	}
	return f, err
}

// expectedPairs reads an object, or an array of [key, value] arrays.
func expectedPairs(v any) (object, error) {
	switch v := v.(type) {
	case object:
		return v, nil
	case []any:
		var out object
		for _, e := range v {
			kv, ok := e.([]any)
			if !ok || len(kv) != 2 {
				return nil, fmt.Errorf("pair is %v", e)
			}
			k, ok := kv[0].(string)
			if !ok {
				return nil, fmt.Errorf("key is %T", kv[0])
			}
			out = append(out, pair{k, kv[1]})
		}
		return out, nil
	}
	return nil, fmt.Errorf("pairs are %T", v)
}

// expectedMember reads [bare item or inner list, parameters].
func expectedMember(v any) (Member, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		return Member{}, fmt.Errorf("member is %v", v)
	}
	var m Member
	if inner, ok := arr[0].([]any); ok {
		m.Kind = InnerList
		for _, e := range inner {
			it, err := expectedMember(e)
			if err != nil {
				return m, err
			}
			m.Inner = append(m.Inner, it)
		}
	} else {
		bare, err := expectedBare(arr[0])
		if err != nil {
			return m, err
		}
		m.Value = bare
	}
	params, err := expectedPairs(arr[1])
	if err != nil {
		return m, err
	}
	for _, p := range params {
		bare, err := expectedBare(p.val)
		if err != nil {
			return m, err
		}
		m.Params = append(m.Params, Param{Key: p.key, Value: bare})
	}
	return m, nil
}

func expectedBare(v any) (Value, error) {
	switch v := v.(type) {
	case json.Number:
		s := v.String()
		if !strings.ContainsAny(s, ".eE") {
			n, err := v.Int64()
			return Value{Kind: Integer, N: n}, err
		}
		// Thousandths, rounded half to even as RFC 9651 section 4.1.5
		// serializes them.
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			return Value{}, fmt.Errorf("number %s", s)
		}
		r.Mul(r, big.NewRat(1000, 1))
		f, _ := r.Float64()
		n := math.RoundToEven(f)
		return Value{Kind: Decimal, N: int64(n)}, nil
	case string:
		return Value{Kind: String, S: v}, nil
	case bool:
		if v {
			return Value{Kind: Boolean, N: 1}, nil
		}
		return Value{Kind: Boolean}, nil
	case object:
		var typ string
		var val any
		for _, p := range v {
			switch p.key {
			case "__type":
				typ, _ = p.val.(string)
			case "value":
				val = p.val
			}
		}
		switch typ {
		case "token":
			s, _ := val.(string)
			return Value{Kind: Token, S: s}, nil
		case "binary":
			s, _ := val.(string)
			b, err := base32.StdEncoding.DecodeString(s)
			return Value{Kind: ByteSequence, S: base64.StdEncoding.EncodeToString(b)}, err
		case "date":
			n, ok := val.(json.Number)
			if !ok {
				return Value{}, fmt.Errorf("date is %T", val)
			}
			d, err := n.Int64()
			return Value{Kind: Date, N: d}, err
		case "displaystring":
			s, _ := val.(string)
			return Value{Kind: DisplayString, S: s}, nil
		}
		return Value{}, fmt.Errorf("unknown __type %q", typ)
	}
	return Value{}, fmt.Errorf("bare item is %T", v)
}
