package replicator

import "time"

// FeignDecoderFailures makes r's next n streams fail at their start as
// PostgreSQL's decoder does when it fails inside the server (XX000), a
// fault a real server produces only by chance.
func FeignDecoderFailures(r *Replicator, n int) { r.decoderFaults = n }

// SetMembershipEvery makes r read the publications' catalog rows between
// flushes every d instead of membershipEvery.
func SetMembershipEvery(r *Replicator, d time.Duration) { r.memberEvery = d }

// StreamInserter is the interface a sink implements to take the copy's
// rows as INSERT streams; tests that wrap a sink's InsertStream assert it,
// since a wrapper of another signature would silently turn the copy to
// Writes.
type StreamInserter = streamInserter
