// Package elected tells when a JetStream stream of the account elects a
// leader, or the connection comes back.
//
// A client following a replicated stream through an ordered consumer or a
// key-value watch learns that the server holding its consumer died only
// when the consumer's heartbeats stop arriving: seconds to tens of seconds
// after new leaders already serve the streams. The consumer is placed on
// one server, not always the stream's leader, so the stream it follows may
// keep its leader while the consumer dies; but a lost server leads some
// stream of a busy account, and JetStream announces each election on an
// advisory subject. Following every stream's elections lets the client
// start its consumers over at once after a server's loss, at the price of
// a needless restart when a leader moves on its own.
package elected

import (
	"github.com/nats-io/nats.go"
)

// Subject is JetStream's advisory of a new leader, for every stream of the
// account.
const Subject = "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.>"

// Watch returns a channel that receives when a stream of the account
// elects a leader, or when the connection comes back after a loss (an
// advisory sent while it was away is never received, and the server it
// lost may be the one that died), and the func that stops watching. Signals
// coalesce while one is not taken. A connection without permission to
// subscribe to the advisory is refused asynchronously by the server; the
// channel then tells only of reconnections, and missed heartbeats remain
// the sign of an election.
func Watch(nc *nats.Conn) (<-chan struct{}, func(), error) {
	ch := make(chan struct{}, 1)
	signal := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	back := nc.StatusChanged(nats.CONNECTED)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range back {
			signal()
		}
	}()
	stopBack := func() {
		nc.RemoveStatusListener(back)
		<-done
	}
	sub, err := nc.Subscribe(Subject, func(*nats.Msg) { signal() })
	if err != nil {
		return ch, stopBack, err
	}
	return ch, func() {
		_ = sub.Unsubscribe()
		stopBack()
	}, nil
}
