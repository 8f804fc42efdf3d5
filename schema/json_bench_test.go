package schema

import (
	"strings"
	"testing"
)

// BenchmarkCheckJSON: the cost --json-type=json adds per value on ferry's
// side, for a 1 KB document.
func BenchmarkCheckJSON(b *testing.B) {
	v := []byte(`{"user":{"id":12345,"country":"de","tags":["a","b","c"]},"amount":123.45,"status":"paid","items":[1,2,3,4,5],"note":"` + strings.Repeat("x", 800) + `"}`)
	b.SetBytes(int64(len(v)))
	for b.Loop() {
		if err := CheckJSON(v); err != nil {
			b.Fatal(err)
		}
	}
}
