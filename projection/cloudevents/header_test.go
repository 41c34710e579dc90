package cloudevents

import "testing"

func TestPercentEncoding(t *testing.T) {
	tests := []struct{ plain, encoded string }{
		{"order-42", "order-42"},
		{"a b", "a%20b"},
		{`say "hi"`, "say%20%22hi%22"},
		{"100%", "100%25"},
		{"é 日本", "%C3%A9%20%E6%97%A5%E6%9C%AC"},
		{"tab\tdel\x7f", "tab%09del%7F"},
		{"", ""},
	}
	for _, tc := range tests {
		if got := percentEncode(tc.plain); got != tc.encoded {
			t.Errorf("percentEncode(%q) = %q, want %q", tc.plain, got, tc.encoded)
		}
		if got := percentDecode(tc.encoded); got != tc.plain {
			t.Errorf("percentDecode(%q) = %q, want %q", tc.encoded, got, tc.plain)
		}
	}
}

func TestPercentDecodeKeepsMalformedEscapes(t *testing.T) {
	for in, want := range map[string]string{
		"50% off":   "50% off",
		"%":         "%",
		"%4":        "%4",
		"%zz%41":    "%zzA",
		"%e6%97%a5": "日",
	} {
		if got := percentDecode(in); got != want {
			t.Errorf("percentDecode(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPercentEncodeDoesNotAllocateForPlainValues(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = percentEncode("journal.orders.created") }); n != 0 {
		t.Errorf("percentEncode of a plain value allocates %v times", n)
	}
}
