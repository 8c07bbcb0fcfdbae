// SPDX-License-Identifier: Apache-2.0

package overload

import "reflect"

// fillZero sets every field of *dst that is zero to the same field of
// def, nested structs field by field: the rule of the sections whose
// defaults are a library's Default…Config (the policer's bucket and
// controller, the client shares), where a zero field means "the
// default". A field whose zero is itself a setting (voigt-queue's kd) or
// that has no default here (shares' reply_buffer) must be zero in def.
// Numbers and strings compare to zero with ==, as cmp.Or does (so −0 is
// zero and NaN is not); slices, maps and pointers have no default to
// fill and are left as they are.
func fillZero[T any](dst *T, def T) { fillStruct(reflect.ValueOf(dst).Elem(), reflect.ValueOf(def)) }

func fillStruct(dst, def reflect.Value) {
	for i := range dst.NumField() {
		f, d := dst.Field(i), def.Field(i)
		if !f.CanSet() {
			continue
		}
		var zero bool
		switch f.Kind() {
		case reflect.Struct:
			fillStruct(f, d)
			continue
		case reflect.Float32, reflect.Float64:
			zero = f.Float() == 0
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			zero = f.Int() == 0
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			zero = f.Uint() == 0
		case reflect.String:
			zero = f.String() == ""
		case reflect.Bool:
			zero = !f.Bool()
		}
		if zero {
			f.Set(d)
		}
	}
}
