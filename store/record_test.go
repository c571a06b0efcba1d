package store

import (
	"reflect"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

// TestRecordKeepsEveryField: a record holds every field of a
// presence.User but the aggregate it derives again, so a field added to
// User and forgotten here fails: each field is set to a value of its own
// (by reflection), packed and read back.
func TestRecordKeepsEveryField(t *testing.T) {
	var u presence.User
	v := reflect.ValueOf(&u).Elem()
	for i := range v.NumField() {
		if v.Type().Field(i).Name == "Current" {
			continue
		}
		fill(t, v.Field(i), i+1)
	}
	since := time.Unix(1_700_000_000, 5).UTC()
	r := pack(u, 7, since)
	if got := r.user(); !reflect.DeepEqual(got, u) {
		t.Fatalf("a record read back\n%+v\nwant\n%+v", got, u)
	}
	if r.version != 7 || !r.since.Equal(since) {
		t.Fatalf("version %d since %v, want 7 and %v", r.version, r.since, since)
	}
}

// fill sets v (and, for a struct or a pointer, what it holds) to a value
// that is not zero, told apart by n.
func fill(t *testing.T, v reflect.Value, n int) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + string(rune('a'+n%26)))
	case reflect.Int, reflect.Int64, reflect.Int32:
		if v.Type() == reflect.TypeFor[time.Duration]() {
			v.SetInt(int64(n) * int64(time.Second))
			return
		}
		v.SetInt(int64(n))
	case reflect.Uint64, reflect.Uint32, reflect.Uint16, reflect.Uint8, reflect.Uint:
		v.SetUint(uint64(n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(t, s.Index(0), n+1)
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), n+1)
		v.Set(p)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(int64(n)*1000, 0).UTC()))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), n+i+1)
			}
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k, n+1)
		fill(t, e, n+2)
		m.SetMapIndex(k, e)
		v.Set(m)
	default:
		t.Fatalf("fill: a %s (%s) is not handled", v.Kind(), v.Type())
	}
}
