package cursor

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// A registration is stored as one value:
//
//	rowFormat (1 byte) | incarnation (8 bytes BE) | uvarint len(state) | state | Config as JSON
//
// The delivery state — namespace, State, NextSeq, Attempts, NextAttemptAt,
// LastError, Delivered, CreatedAt, UpdatedAt, CompletedAt, Furthest, Ahead,
// Filtered, FilterErrors, LastFilterError — is a compact
// binary record, because Flush rewrites it for every registration that made
// progress and must not spend its time in a JSON codec. The Config is JSON:
// it changes only on Create and Replace, and a field added to Config is
// stored without touching this file. A field added to Registration itself
// must be added to the state record; TestStateRecordCoversRegistration
// fails until it is.

// errShort reports a state record that ends before its fields do.
var errShort = errors.New("state record is truncated")

// encodeRow renders r. Its Config is encoded again unless r carries the
// stored bytes (r.config) from a read that left it undecoded.
func encodeRow(r *row) ([]byte, error) {
	config := r.config
	if config == nil {
		var err error
		if config, err = json.Marshal(&r.Config); err != nil {
			return nil, fmt.Errorf("cursor: encode registration %q: %w", r.ID, err)
		}
	}
	state := appendState(make([]byte, 0, 96+len(r.Namespace)+len(r.LastError)), &r.Registration)
	v := make([]byte, 0, 1+8+binary.MaxVarintLen64+len(state)+len(config))
	v = append(v, rowFormat)
	v = binary.BigEndian.AppendUint64(v, r.inc)
	v = binary.AppendUvarint(v, uint64(len(state)))
	v = append(v, state...)
	return append(v, config...), nil
}

// decodeRow reads the row stored under id in the file at path, which the
// error names. With full, the Config is decoded too; without, its bytes are
// kept in row.config to be written back as they are, and only ID and
// Namespace of the Config are set.
func decodeRow(path string, id, v []byte, full bool) (row, error) {
	r, config, err := decodeState(path, id, v)
	if err != nil {
		return r, err
	}
	if !full {
		r.config = append([]byte(nil), config...)
		return r, nil
	}
	return r, decodeConfigInto(path, &r, config)
}

// decodeState reads the row stored under id up to its Config, whose bytes
// (v's memory) it returns undecoded: a reader that filters on the state
// decodes the Config's JSON only for the rows it keeps.
func decodeState(path string, id, v []byte) (row, []byte, error) {
	inc, state, config, err := splitRow(v)
	if err != nil {
		return row{}, nil, unreadableRow(path, string(id), err)
	}
	r := row{inc: inc}
	if err := readState(state, &r.Registration); err != nil {
		return row{}, nil, unreadableRow(path, string(id), err)
	}
	r.ID = string(id)
	return r, config, nil
}

// decodeConfigInto decodes config into r's Config, keeping the id and the
// namespace of the row.
func decodeConfigInto(path string, r *row, config []byte) error {
	id, ns := r.ID, r.Namespace
	if err := json.Unmarshal(config, &r.Config); err != nil {
		*r = row{}
		return unreadableRow(path, id, err)
	}
	r.ID, r.Namespace = id, ns
	return nil
}

// splitRow cuts a stored row into its incarnation, its state record and
// its Config's bytes; both slices are v's memory.
func splitRow(v []byte) (inc uint64, state, config []byte, err error) {
	if len(v) < 9 || v[0] != rowFormat {
		return 0, nil, nil, errors.New("unknown format")
	}
	n, w := binary.Uvarint(v[9:])
	if w <= 0 || n > uint64(len(v)-9-w) {
		return 0, nil, nil, errShort
	}
	start := 9 + w
	return binary.BigEndian.Uint64(v[1:9]), v[start : start+int(n)], v[start+int(n):], nil
}

// unreadableRow names the row and the file a decoding error was found in.
func unreadableRow(path, id string, err error) error {
	return fmt.Errorf("cursor: registration %q in %s is unreadable (the file is damaged; restore it from a backup): %w",
		id, path, err)
}

func appendState(b []byte, r *Registration) []byte {
	b = appendString(b, r.Namespace)
	b = appendString(b, string(r.State))
	b = binary.AppendUvarint(b, r.NextSeq)
	b = binary.AppendUvarint(b, uint64(r.Attempts))
	b = appendTime(b, r.NextAttemptAt)
	b = appendString(b, r.LastError)
	b = binary.AppendUvarint(b, r.Delivered)
	b = appendTime(b, r.CreatedAt)
	b = appendTime(b, r.UpdatedAt)
	b = appendTime(b, r.CompletedAt)
	b = binary.AppendUvarint(b, r.Furthest)
	filtering := r.Filtered != 0 || r.FilterErrors != 0 || r.LastFilterError != ""
	if len(r.Ahead) == 0 && !filtering {
		return b
	}
	// The set's length, 0 when empty, so the filter's counts can follow.
	var ahead []byte
	if len(r.Ahead) > 0 {
		ahead = appendAhead(nil, r.Ahead)
	}
	b = binary.AppendUvarint(b, uint64(len(ahead)))
	b = append(b, ahead...)
	if !filtering {
		return b
	}
	b = binary.AppendUvarint(b, r.Filtered)
	b = binary.AppendUvarint(b, r.FilterErrors)
	return appendString(b, r.LastFilterError)
}

func readState(b []byte, r *Registration) error {
	d := decoder{b: b}
	r.Namespace = d.string()
	r.State = State(d.string())
	r.NextSeq = d.uvarint()
	r.Attempts = uint32(d.uvarint())
	r.NextAttemptAt = d.time()
	r.LastError = d.string()
	r.Delivered = d.uvarint()
	r.CreatedAt = d.time()
	r.UpdatedAt = d.time()
	r.CompletedAt = d.time()
	if len(d.b) > 0 {
		// Absent from rows written before the field existed.
		r.Furthest = d.uvarint()
	}
	if len(d.b) > 0 && d.err == nil {
		// Absent from rows without an acknowledged-ahead set.
		n := d.uvarint()
		if n > uint64(len(d.b)) {
			return errShort
		}
		a, err := readAhead(d.take(int(n)))
		if err != nil {
			return err
		}
		r.Ahead = a
	}
	if len(d.b) > 0 && d.err == nil {
		// Absent from rows whose filter never passed a message over.
		r.Filtered = d.uvarint()
		r.FilterErrors = d.uvarint()
		r.LastFilterError = d.string()
	}
	return d.err
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendTime stores t as its instant (seconds and nanoseconds, UTC); the
// zero time is one byte.
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.BigEndian.AppendUint64(b, uint64(t.Unix()))
	return binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond()))
}

// decoder reads a state record; the first error sticks and every later read
// returns a zero value.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.b) {
		d.err = errShort
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.err = errShort
		return ""
	}
	return string(d.take(int(n)))
}

func (d *decoder) time() time.Time {
	switch flag := d.take(1); {
	case flag == nil || flag[0] == 0:
		return time.Time{}
	case flag[0] != 1:
		d.err = fmt.Errorf("time flag %d is unknown", flag[0])
		return time.Time{}
	}
	b := d.take(12)
	if b == nil {
		return time.Time{}
	}
	return time.Unix(int64(binary.BigEndian.Uint64(b[:8])), int64(binary.BigEndian.Uint32(b[8:]))).UTC()
}
