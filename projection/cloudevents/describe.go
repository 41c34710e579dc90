package cloudevents

import (
	"fmt"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"

	"github.com/jetstream-bridge/bridge/projection"
)

var _ projection.Describer = (*Projection)(nil)

// Describe returns the CloudEvent Project would send for r, as a filter
// reads it: the same event, built and checked the same way, with its
// attributes and extensions in a map instead of written out.
func (p *Projection) Describe(t projection.Target, r *projection.Record) (projection.Event, error) {
	ev, err := p.describe(t, r)
	if err != nil {
		return projection.Event{}, fmt.Errorf("journal message %d: %w", r.Seq, err)
	}
	return ev, nil
}

func (p *Projection) describe(t projection.Target, r *projection.Record) (projection.Event, error) {
	e, _, err := p.checkedEvent(t, r)
	if err != nil {
		return projection.Event{}, err
	}
	ec := e.Context.(*event.EventContextV1) // validate refused every other
	attrs := make(map[string]any, 8+len(ec.Extensions))
	for name, v := range ec.Extensions {
		attrs[name] = attributeValue(v)
	}
	attrs["specversion"] = ec.GetSpecVersion()
	attrs["id"] = ec.ID
	attrs["source"] = ec.Source.String()
	attrs["type"] = ec.Type
	if ec.DataContentType != nil {
		attrs["datacontenttype"] = *ec.DataContentType
	}
	if ec.DataSchema != nil {
		attrs["dataschema"] = ec.DataSchema.String()
	}
	if ec.Subject != nil {
		attrs["subject"] = *ec.Subject
	}
	if ec.Time != nil {
		attrs["time"] = ec.Time.Time
	}
	return projection.Event{Attributes: attrs, DataContentType: e.DataContentType(), Data: e.Data()}, nil
}

// attributeValue is an extension's value as a filter reads it: the
// CloudEvents types as Go's own, integers as int64.
func attributeValue(v any) any {
	switch v := v.(type) {
	case int32:
		return int64(v)
	case types.Timestamp:
		return v.Time
	case *types.Timestamp:
		return v.Time
	case types.URI:
		return v.String()
	case *types.URI:
		return v.String()
	case types.URIRef:
		return v.String()
	case *types.URIRef:
		return v.String()
	}
	return v
}
