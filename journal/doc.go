// Package journal reads the journal stream: the JetStream stream that holds
// every message the bridge delivers, and the only copy of their payloads.
//
// A Reader answers "the messages on this subject filter from this sequence
// on" for many registrations at once, and it is built so that their number
// does not multiply the work of the server:
//
//   - no server consumer per registration or per read: pages come from
//     batched direct gets ($JS.API.DIRECT.GET), one request per page, or,
//     on streams without allow_direct, from a few short-lived pull
//     consumers, each kept for the next page of its filter, one request
//     per page as well;
//   - registrations on the same filter share what was fetched: identical
//     concurrent reads coalesce into one request, and fetched runs stay in a
//     memory cache bounded by bytes;
//   - one ordered consumer (Tail) follows the head of the stream, wakes
//     registrations as messages land and keeps the newest messages in a ring,
//     so registrations that keep up are served from memory.
//
// Records handed out are shared between readers and must never be modified.
//
// The package knows nothing of registrations, cursors, projections or HTTP:
// it must never import the bridge, the cursor store or a projection
// implementation, and it never writes to the stream.
package journal
