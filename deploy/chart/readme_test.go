package chart

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// tableRows returns the cells of every Markdown table row in the file.
func tableRows(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") {
			continue
		}
		var cells []string
		for c := range strings.SplitSeq(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	return rows
}

var backticked = regexp.MustCompile("`([^`]+)`")

// The chart's README documents every value, and says what a flag means
// in the words of docs/deployment.md.
func TestREADME(t *testing.T) {
	docs := map[string]string{} // flag → meaning
	for _, row := range tableRows(t, "../../docs/deployment.md") {
		if len(row) == 3 && strings.HasPrefix(row[0], "`--") {
			docs[strings.Trim(row[0], "`")] = row[2]
		}
	}
	if docs["--lease-ttl"] == "" {
		t.Fatal("docs/deployment.md has no row for --lease-ttl")
	}
	documented := map[string]bool{}
	compared := map[string]bool{}
	for _, row := range tableRows(t, chartDir+"/README.md") {
		if len(row) != 4 {
			continue
		}
		for _, m := range backticked.FindAllStringSubmatch(row[0], -1) {
			documented[m[1]] = true
		}
		flag := strings.Trim(row[2], "`")
		if want, ok := docs[flag]; ok {
			compared[flag] = true
			if row[3] != want {
				t.Errorf("the chart's README says %s is %q; docs/deployment.md says %q", flag, row[3], want)
			}
		}
	}
	for _, flag := range []string{"--kv-bucket", "--kv-replicas", "--lease-ttl", "--flush-interval"} {
		if !compared[flag] {
			t.Errorf("the chart's README has no value for %s in a row of its own", flag)
		}
	}
	b, err := os.ReadFile(chartDir + "/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	for _, path := range leaves(values, "") {
		ok := false
		for p := path; p != "" && !ok; p = p[:max(strings.LastIndex(p, "."), 0)] {
			ok = documented[p]
		}
		if !ok {
			t.Errorf("values.yaml has %s, which the chart's README does not document", path)
		}
	}
}

// leaves are the dotted paths of v's values that are not maps.
func leaves(v map[string]any, prefix string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(v)) {
		if m, ok := v[k].(map[string]any); ok && len(m) > 0 {
			out = append(out, leaves(m, prefix+k+".")...)
		} else {
			out = append(out, prefix+k)
		}
	}
	return out
}
