package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzValidJSON holds Valid to its promise, the same answer as
// json.Valid and utf8.Valid together, for any input; and validV2, the
// json/v2 rendering measured against it, to the same.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{
		``, ` `, `0`, `-0`, `01`, `1.`, `1.5e`, `1.5E+3`, `-`, `"a\u00e9\n"`, `"\x"`, "\"\x01\"", `"\u12g4"`,
		`{"a":[1,true,false,null,{"b":"c"}]}`, `{"a" : 1 , }`, `[1,]`, `[] x`, ` {} `, `{"a"}`, `tru`, `nul`,
		"\"\xff\"", `"é"`, strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth),
		strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := json.Valid(b) && utf8.Valid(b)
		if got := Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, want %v", b, got, want)
		}
		if got := validV2(b); got != want {
			t.Fatalf("validV2(%q) = %v, want %v", b, got, want)
		}
	})
}
