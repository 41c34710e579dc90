package journal_test

import (
	"testing"

	"github.com/jetstream-bridge/bridge/journal"
)

func TestSubjectMatches(t *testing.T) {
	for _, c := range []struct {
		filter, subject string
		want            bool
	}{
		{"journal.orders.created", "journal.orders.created", true},
		{"journal.orders.created", "journal.orders.updated", false},
		{"journal.orders.created", "journal.orders", false},
		{"journal.orders", "journal.orders.created", false},
		{"journal.*.created", "journal.orders.created", true},
		{"journal.*.created", "journal.orders.x.created", false},
		{"journal.*", "journal", false},
		{"journal.>", "journal.orders", true},
		{"journal.>", "journal.orders.created.v1", true},
		{"journal.>", "journal", false},
		{">", "journal", true},
		{"*", "journal", true},
		{"*", "journal.orders", false},
		{"*.*.>", "a.b.c", true},
		{"*.*.>", "a.b", false},
		{"journal.orders", "journal.orders2", false},
		{"journal.order", "journal.orders", false},
		{"journal.*", "journal.", false},
	} {
		if got := journal.SubjectMatches(c.filter, c.subject); got != c.want {
			t.Errorf("SubjectMatches(%q, %q) = %v, want %v", c.filter, c.subject, got, c.want)
		}
	}
}

func BenchmarkSubjectMatches(b *testing.B) {
	for b.Loop() {
		journal.SubjectMatches("journal.*.created.>", "journal.orders.created.eu.v1")
	}
}
