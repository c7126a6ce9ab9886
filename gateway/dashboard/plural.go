package dashboard

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
