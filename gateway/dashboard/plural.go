package dashboard

import "reflect"

// integer is a count of things.
type integer interface {
	~int | ~int64 | ~uint64
}

// Plural returns the noun that goes with n things: one when n is 1,
// else many ("1 client", "2 clients", "0 clients"). The dashboard and
// cairn status both word their counts with it.
func Plural[N integer](n N, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// pluralAny is Plural for the page's template, which passes a count of
// any integer type.
func pluralAny(n any, one, many string) string {
	v := reflect.ValueOf(n)
	switch {
	case v.CanInt():
		return Plural(v.Int(), one, many)
	case v.CanUint():
		return Plural(v.Uint(), one, many)
	}
	return many
}
