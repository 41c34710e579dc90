package a2a

import (
	"errors"
	"fmt"
	"time"
)

// utcTimestamp returns s, an RFC 3339 time, as A2A 1.0 sends a
// google.protobuf.Timestamp: the same instant in UTC, marked Z (the
// specification, §5.6.1, forbids other offsets, and receivers generated
// from a2a.proto refuse them). The fractional digits are kept as given,
// never rounded or padded; more than nine is an error, as a Timestamp
// holds nanoseconds and a receiver refuses the rest rather than round it.
// A time already in that form is returned as it is, without allocating.
func utcTimestamp(s string) (string, error) {
	t, err := parseTimestamp(s)
	if err != nil {
		return "", fmt.Errorf("%q %w", s, err)
	}
	if t.utc && t.year >= 1 && s[10] == 'T' && s[len(s)-1] == 'Z' && (t.frac == "" || s[19] == '.') {
		return s, nil
	}
	at := time.Date(t.year, time.Month(t.month), t.day, t.hour, t.min, t.sec, 0, time.UTC).Add(-t.offset)
	if y := at.Year(); y < 1 || y > 9999 {
		return "", fmt.Errorf("%q is outside the years 0001 to 9999 a Timestamp holds", s)
	}
	b := make([]byte, 0, len("2006-01-02T15:04:05.999999999Z"))
	b = at.AppendFormat(b, "2006-01-02T15:04:05")
	if t.frac != "" {
		b = append(append(b, '.'), t.frac...)
	}
	return string(append(b, 'Z')), nil
}

type timestamp struct {
	year, month, day, hour, min, sec int
	frac                             string // the digits after the decimal mark
	offset                           time.Duration
	utc                              bool // Z rather than a numeric offset
}

var errNotRFC3339 = errors.New("is not an RFC 3339 time")

// parseTimestamp reads date-time of RFC 3339 §5.6, with "," accepted for
// the decimal mark as time.Parse accepts it.
func parseTimestamp(s string) (timestamp, error) {
	var t timestamp
	if len(s) < len("2006-01-02T15:04:05Z") || s[4] != '-' || s[7] != '-' || s[10] != 'T' && s[10] != 't' ||
		s[13] != ':' || s[16] != ':' {
		return t, errNotRFC3339
	}
	ok := true
	num := func(i, n int) int {
		v := 0
		for _, c := range []byte(s[i : i+n]) {
			ok = ok && '0' <= c && c <= '9'
			v = v*10 + int(c-'0')
		}
		return v
	}
	t.year, t.month, t.day = num(0, 4), num(5, 2), num(8, 2)
	t.hour, t.min, t.sec = num(11, 2), num(14, 2), num(17, 2)
	zone := s[19:]
	if zone[0] == '.' || zone[0] == ',' {
		n := 1
		for n < len(zone) && '0' <= zone[n] && zone[n] <= '9' {
			n++
		}
		t.frac, zone = zone[1:n], zone[n:]
	}
	switch {
	case zone == "Z" || zone == "z":
		t.utc = true
	case len(zone) == len("+07:00") && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':':
		h, m := num(len(s)-5, 2), num(len(s)-2, 2)
		ok = ok && h <= 23 && m <= 59
		t.offset = time.Duration(h)*time.Hour + time.Duration(m)*time.Minute
		if zone[0] == '-' {
			t.offset = -t.offset
		}
	default:
		ok = false
	}
	if !ok || t.month < 1 || t.month > 12 || t.day < 1 || t.day > daysIn(t.month, t.year) ||
		t.hour > 23 || t.min > 59 || t.sec > 59 || len(s) > 19 && (s[19] == '.' || s[19] == ',') && t.frac == "" {
		return t, errNotRFC3339
	}
	if len(t.frac) > 9 {
		return t, errors.New("has more than nine fractional digits; a Timestamp holds nanoseconds")
	}
	return t, nil
}

func daysIn(month, year int) int {
	if month == 2 && year%4 == 0 && (year%100 != 0 || year%400 == 0) {
		return 29
	}
	return [...]int{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[month-1]
}
