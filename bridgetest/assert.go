package bridgetest

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// AssertInOrder fails the test unless the first arrivals of the accepted
// deliveries in ds (the first POST answered 2xx of each webhook-id) come
// in stream order: increasing journal sequence, and for A2A events of one
// journal message increasing index. That is the bridge's promise per
// registration; a retry or a replay may repeat earlier ones after them.
// Give it one registration's deliveries. Deliveries without a sequence (a
// CloudEvent published as one keeps its own attributes) are not ordered.
func AssertInOrder(tb testing.TB, ds []Delivery) {
	tb.Helper()
	seen := map[string]bool{}
	var last [2]uint64
	var lastID string
	for _, d := range accepted(ds) {
		if seen[d.ID] || d.Seq == 0 {
			continue
		}
		seen[d.ID] = true
		key := [2]uint64{d.Seq, a2aIndex(d)}
		if lastID != "" && !less(last, key) {
			tb.Errorf("bridgetest: %s (sequence %d) arrived after %s (sequence %d): not in stream order\n%s",
				d.ID, d.Seq, lastID, last[0], describe(ds))
			return
		}
		last, lastID = key, d.ID
	}
}

func less(a, b [2]uint64) bool { return a[0] < b[0] || (a[0] == b[0] && a[1] < b[1]) }

// a2aIndex is the index of an A2A event in its journal message, the last
// part of its webhook-id; 0 for other deliveries.
func a2aIndex(d Delivery) uint64 {
	if d.A2A == nil {
		return 0
	}
	n, _ := strconv.ParseUint(d.ID[strings.LastIndexByte(d.ID, '-')+1:], 10, 64)
	return n
}

// AssertAtLeastOnce fails the test unless every journal sequence in seqs
// was accepted at least once in ds (as a CloudEvent, in a batch, or as an
// A2A event). Repeats are allowed: at least once is the promise.
func AssertAtLeastOnce(tb testing.TB, ds []Delivery, seqs ...uint64) {
	tb.Helper()
	got := map[uint64]bool{}
	for _, d := range accepted(ds) {
		got[d.Seq] = true
		for i := range d.Batch {
			got[natsSeq(&d.Batch[i])] = true
		}
	}
	var missing []uint64
	for _, s := range seqs {
		if !got[s] {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		tb.Errorf("bridgetest: sequences %v were never accepted; the receiver got:\n%s", missing, describe(ds))
	}
}

// AssertSigned fails the test unless every delivery in ds carries a
// Standard Webhooks signature that verifies with the receiver's secret,
// over the body as received, with a timestamp within five minutes.
func AssertSigned(tb testing.TB, ds []Delivery) {
	tb.Helper()
	for _, d := range ds {
		if d.SignatureErr != nil {
			tb.Errorf("bridgetest: %s (sequence %d): signature does not verify: %v", d.ID, d.Seq, d.SignatureErr)
		}
	}
}
