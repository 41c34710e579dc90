package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/jetstream-bridge/bridge/admin"
)

// maxLastErrorWidth keeps a table row on one screen line.
const maxLastErrorWidth = 60

func cmdList(ctx context.Context, s *session, args []string) error {
	fs := s.flags()
	cf := addClientFlags(fs)
	parked := fs.Bool("parked", false, "only parked registrations (same as --state parked)")
	namespace := fs.String("namespace", "", "only this namespace: outbox or a2a")
	state := fs.String("state", "", "only this state: active, parked or completed")
	limit := fs.Int("limit", 0, "registrations per page (1-1000; default the API's)")
	if err := s.parse(fs, args); err != nil {
		return err
	}
	if _, err := positional(fs); err != nil {
		return err
	}
	if *parked {
		if *state != "" && *state != "parked" {
			return usagef("--parked and --state %s contradict each other", *state)
		}
		*state = "parked"
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	q := url.Values{}
	for k, v := range map[string]string{"namespace": *namespace, "state": *state} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if *limit != 0 {
		q.Set("limit", strconv.Itoa(*limit))
	}
	rows, err := listAll(ctx, c, q)
	if err != nil {
		return err
	}
	if cf.json {
		return writeJSONList(s.out, rows)
	}
	return printTable(s.out, rows)
}

// listAll follows the pages until the API says there are no more.
func listAll(ctx context.Context, c *adminClient, q url.Values) ([]json.RawMessage, error) {
	rows := []json.RawMessage{}
	for {
		data, err := c.call(ctx, "GET", "/v1/registrations?"+q.Encode(), nil, nil)
		if err != nil {
			return nil, err
		}
		var page listAnswer
		if err := decodeAnswer(data, &page); err != nil {
			return nil, err
		}
		rows = append(rows, page.Registrations...)
		if page.Next == "" || page.Next == q.Get("after") {
			return rows, nil
		}
		q.Set("after", page.Next)
	}
}

// writeJSONList prints every page as one answer of the API's shape, with
// the registrations exactly as the API gave them.
func writeJSONList(w io.Writer, rows []json.RawMessage) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(listAnswer{Registrations: rows})
}

func printTable(w io.Writer, raws []json.RawMessage) error {
	if len(raws) == 0 {
		_, err := fmt.Fprintln(w, "no registrations")
		return err
	}
	rows := make([]admin.Registration, len(raws))
	keyed := false
	for i, raw := range raws {
		if err := decodeAnswer(raw, &rows[i]); err != nil {
			return err
		}
		keyed = keyed || windowed(rows[i])
	}
	// The ordering columns come only when a registration is keyed: the
	// rest deliver one POST at a time with nothing ahead.
	orderHead := ""
	if keyed {
		orderHead = "ORDER\tIN FLIGHT\tAHEAD\t"
	}
	tw := newTable(w)
	fmt.Fprintf(tw, "ID\tNAMESPACE\tSTATE\tNEXT SEQ\tATTEMPTS\tDELIVERED\t%sURL\tLAST ERROR\n", orderHead)
	for _, r := range rows {
		order := ""
		if keyed {
			order = fmt.Sprintf("%s\t%d\t%d\t", orderKey(r), r.InFlight, r.Ahead)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s%s\t%s\n", r.ID, r.Namespace, r.State, r.NextSeq,
			r.Attempts, r.Delivered, order, hostOf(r.URL), clip(oneLine(r.LastError), maxLastErrorWidth))
	}
	return tw.Flush()
}

// orderKey is a registration's ordering key and its POSTs at once, in a
// table cell; "-" without ordering, and the key alone for the whole
// registration's order, one POST at a time.
func orderKey(r admin.Registration) string {
	switch {
	case r.Ordering == nil:
		return "-"
	case r.Ordering.Key == "registration":
		return r.Ordering.Key
	}
	return fmt.Sprintf("%s/%d", r.Ordering.Key, r.Ordering.MaxInFlight)
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// oneLine keeps a table cell on its row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// clip shortens s to n runes, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
