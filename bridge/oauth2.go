package bridge

import (
	"context"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/webhook"
)

// oauth2Of is a registration's client-credentials grant as the sender
// takes it; the zero value asks for no token.
func oauth2Of(o *cursor.OAuth2) webhook.OAuth2 {
	if o == nil {
		return webhook.OAuth2{}
	}
	// The same fields: a field added to one and not the other stops the
	// build here.
	return webhook.OAuth2(*o)
}

// paceOf is what the sender waits on before the POST it makes again after
// a 401 renewed reg's token: reg's rate limit, which counts every POST.
// Nil when reg has no oauth2 grant or no rate limit.
func (w *Worker) paceOf(reg *cursor.Registration) func(context.Context) error {
	if reg.OAuth2 == nil {
		return nil
	}
	if b := w.limits.of(reg); b != nil {
		return b.lim.Wait
	}
	return nil
}
