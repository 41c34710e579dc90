package admin

import (
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/filter"
)

// validMessageFilter compiles an outbox registration's filter (CONTRACT
// §13) into c, as written: the delivery compiles the same text. The
// refusal is CEL's own message, with its line and column.
func validMessageFilter(c *cursor.Config, expr string) error {
	if expr == "" {
		return nil
	}
	if _, err := filter.Compile(expr); err != nil {
		return invalid("%v", err)
	}
	c.Filter = expr
	return nil
}
