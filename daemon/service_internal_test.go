package daemon

import "testing"

// Every build registers: micro takes only SemVer, so a release tag loses
// its "v" and any other build string becomes build metadata of 0.0.0.
func TestServiceVersion(t *testing.T) {
	for in, want := range map[string]string{
		"v1.4.0":        "1.4.0",
		"1.4.0":         "1.4.0",
		"v1.2.3-rc.1":   "1.2.3-rc.1",
		"dev":           "0.0.0+dev",
		"d04c986-dirty": "0.0.0+d04c986-dirty",
		"v1.4":          "0.0.0+v1-4",
		"my build!":     "0.0.0+my-build",
		"":              "0.0.0",
	} {
		got := serviceVersion(in)
		if got != want || !semVer.MatchString(got) {
			t.Errorf("serviceVersion(%q) = %q, want %q (SemVer)", in, got, want)
		}
	}
}
