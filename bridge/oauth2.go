package bridge

import (
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
