package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// manifestOf is a file of n registrations, in YAML or in JSON, each with
// a secret from the environment.
func manifestOf(n int, asJSON bool) []byte {
	var b strings.Builder
	if asJSON {
		regs := make([]map[string]string, n)
		for i := range regs {
			regs[i] = map[string]string{"id": fmt.Sprintf("bench-%05d", i), "namespace": "outbox",
				"subject": fmt.Sprintf("journal.bench.%d", i), "url": fmt.Sprintf("https://hooks.example/%d", i), "secret": "${BENCH_SECRET}"}
		}
		data, _ := json.MarshalIndent(map[string]any{"registrations": regs}, "", "  ")
		return data
	}
	b.WriteString("registrations:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - id: bench-%05d\n    namespace: outbox\n    subject: journal.bench.%d\n    url: https://hooks.example/%d\n    secret: ${BENCH_SECRET}\n", i, i, i)
	}
	return []byte(b.String())
}

// BenchmarkParseManifest10000 reads a file of 10,000 registrations, as
// bridge apply does before its first call: YAML, and strict JSON.
func BenchmarkParseManifest10000(b *testing.B) {
	lookup := env(map[string]string{"BENCH_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
	for _, format := range []string{"yaml", "json"} {
		data := manifestOf(10000, format == "json")
		b.Run(format, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if got, err := parseManifest("bench", data, lookup); err != nil || len(got) != 10000 {
					b.Fatalf("%d entries: %v", len(got), err)
				}
			}
		})
	}
}
