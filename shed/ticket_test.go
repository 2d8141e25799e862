package shed

import (
	"net/netip"
	"reflect"
	"testing"
)

// fillNonZero sets every field of the struct v points to, exported or
// not, to a value other than its zero value.
func fillNonZero(t *testing.T, v reflect.Value) {
	t.Helper()
	for i := range v.NumField() {
		f := v.Field(i)
		f = reflect.NewAt(f.Type(), f.Addr().UnsafePointer()).Elem() // settable, unexported too
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f.SetInt(1)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(1)
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		case reflect.Struct:
			if f.Type().Name() == "Addr" { // netip.Addr: only its methods make one
				f.Set(reflect.ValueOf(netip.MustParseAddr("192.0.2.1")))
				continue
			}
			fillNonZero(t, f)
		default:
			t.Fatalf("field %s: fill a %v too", v.Type().Field(i).Name, f.Kind())
		}
		if f.IsZero() {
			t.Fatalf("field %s is still zero", v.Type().Field(i).Name)
		}
	}
}

// TestPutForgetsTheWholeAttempt: a ticket back from the pool holds
// nothing of its last Attempt, whichever fields were set (clearAsk clears
// field by field: a field added to Attempt and not to clearAsk fails
// here).
func TestPutForgetsTheWholeAttempt(t *testing.T) {
	var a ticket
	fillNonZero(t, reflect.ValueOf(&a.ask).Elem())
	a.clearAsk()
	if v := reflect.ValueOf(a.ask); !v.IsZero() {
		for i := range v.NumField() {
			if !v.Field(i).IsZero() {
				t.Errorf("Attempt.%s survives clearAsk", v.Type().Field(i).Name)
			}
		}
	}
}
