// Package elected tells when a JetStream stream elects a leader.
//
// A client following a replicated stream through an ordered consumer or a
// key-value watch learns that the server it followed died only when the
// consumer's heartbeats stop arriving: seconds to tens of seconds after a
// new leader already serves the stream. JetStream announces each election
// on an advisory subject; following it lets the client start over at once.
package elected

import (
	"github.com/nats-io/nats.go"
)

// subjectPrefix is JetStream's advisory of a stream's new leader, followed
// by the stream's name.
const subjectPrefix = "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED."

// Watch returns a channel that receives when stream elects a leader
// (elections coalesce while one is not taken), and the func that stops
// watching. A connection without permission to subscribe to the advisory
// is refused asynchronously by the server; the channel then stays quiet
// and the heartbeats remain the only sign, as without Watch.
func Watch(nc *nats.Conn, stream string) (<-chan struct{}, func(), error) {
	ch := make(chan struct{}, 1)
	sub, err := nc.Subscribe(subjectPrefix+stream, func(*nats.Msg) {
		select {
		case ch <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return ch, func() {}, err
	}
	return ch, func() { _ = sub.Unsubscribe() }, nil
}
