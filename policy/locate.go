package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// maxDepth bounds the nesting of a policy document (the format needs 4).
const maxDepth = 16

// locator knows the line of every field path of a document ("rules[2].limit"),
// for error messages.
type locator struct {
	data  []byte
	lines map[string]int
}

// lineAt returns the 1-based line of byte offset off.
func (l *locator) lineAt(off int64) int {
	if off > int64(len(l.data)) {
		off = int64(len(l.data))
	}
	if off < 0 {
		off = 0
	}
	return 1 + bytes.Count(l.data[:off], []byte{'\n'})
}

// line returns the line of path, or of its nearest located parent.
func (l *locator) line(path string) int {
	for {
		if n, ok := l.lines[path]; ok {
			return n
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			return 1
		}
		path = path[:i]
	}
}

// schemaError is a problem the walk found at a path.
type schemaError struct {
	path string
	line int
	msg  string
}

func (e *schemaError) Error() string { return e.msg }

// locate walks data as JSON tokens along the shape of t (File), recording
// the line of every path and rejecting keys that t does not have, so that
// an unknown field is reported with its path and line (json's own error
// has neither). It also rejects a key given twice in one object, which
// encoding/json would resolve silently in favour of the last. Syntax
// errors are left for the decoder.
func locate(data []byte, t reflect.Type) (*locator, error) {
	l := &locator{data: data, lines: make(map[string]int)}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := l.value(dec, t, "", 0); err != nil {
		var se *schemaError
		if errors.As(err, &se) {
			return l, err
		}
		return l, nil // a syntax error: the decoder reports it
	}
	return l, nil
}

// value walks one value whose Go type is t (nil: anything) at path.
func (l *locator) value(dec *json.Decoder, t reflect.Type, path string, depth int) error {
	if depth > maxDepth {
		return &schemaError{path, l.lineAt(dec.InputOffset()), "nested too deep"}
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if path != "" {
		if _, ok := l.lines[path]; !ok {
			l.lines[path] = l.lineAt(dec.InputOffset() - 1)
		}
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '{':
		first := make(map[string]int) // the line of each key of this object
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			sub := key
			if path != "" {
				sub = path + "." + key
			}
			line := l.lineAt(dec.InputOffset() - 1)
			if at, dup := first[key]; dup {
				return &schemaError{sub, line, fmt.Sprintf("key %q is given twice (first on line %d)", key, at)}
			}
			first[key] = line
			l.lines[sub] = line
			var ft reflect.Type
			if t != nil {
				switch t.Kind() {
				case reflect.Struct:
					f, ok := fieldByTag(t, key)
					if !ok {
						return &schemaError{sub, line, "unknown field"}
					}
					ft = f
				case reflect.Map:
					ft = t.Elem()
				}
			}
			if err := l.value(dec, ft, sub, depth+1); err != nil {
				return err
			}
		}
	case '[':
		var et reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			et = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := l.value(dec, et, path+"["+strconv.Itoa(i)+"]", depth+1); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// fieldByTag returns the type of t's field whose JSON name is key (exactly:
// the strict decoder still matches case-insensitively, which the walk
// rejects as unknown so that a file has one spelling).
func fieldByTag(t reflect.Type, key string) (reflect.Type, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == key {
			return f.Type, true
		}
	}
	return nil, false
}

// decodeError turns an error of the strict decoder into one with a line
// and, where the decoder knows it, a field path.
func (l *locator) decodeError(err error) (path string, line int, msg string) {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return "", l.lineAt(syn.Offset), syn.Error()
	case errors.As(err, &typ):
		return typ.Field, l.lineAt(typ.Offset), fmt.Sprintf("cannot be a JSON %s (want %v)", typ.Value, typ.Type)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "", l.lineAt(int64(len(l.data))), "unexpected end of the document"
	}
	return "", 1, strings.TrimPrefix(err.Error(), "json: ")
}
