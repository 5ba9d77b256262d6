package buffer

import "fmt"

// RecentIDs remembers the last ids added to it, at most a fixed number, and
// forgets the oldest first. The session records acknowledged message ids in
// it, so a second acknowledgement for the same id (a server that re-acks a
// re-sent message it had already processed) is recognised and not forwarded
// to the app. Bounding it bounds memory: an id older than the window counts
// as unknown again, and its repeated ack is forwarded.
//
// A RecentIDs is not safe for concurrent use; its session serializes access.
type RecentIDs struct {
	max  int
	ring []string // insertion order; once full, ring[next] is the oldest
	next int
	set  map[string]struct{}
}

// NewRecentIDs returns an empty window of max ids. It panics when max is not
// positive: configuration validation rejects such sizes first.
func NewRecentIDs(max int) *RecentIDs {
	if max <= 0 {
		panic(fmt.Sprintf("buffer: NewRecentIDs size must be > 0, got %d", max))
	}
	return &RecentIDs{max: max, set: map[string]struct{}{}}
}

// Add remembers id, forgetting the oldest id when the window is full. An id
// already remembered keeps its place.
func (r *RecentIDs) Add(id string) {
	if _, ok := r.set[id]; ok {
		return
	}
	r.set[id] = struct{}{}
	if len(r.ring) < r.max {
		// The ring grows with use: most sessions acknowledge far fewer ids
		// than the window allows.
		r.ring = append(r.ring, id)
		return
	}
	delete(r.set, r.ring[r.next])
	r.ring[r.next] = id
	r.next = (r.next + 1) % r.max
}

// Contains reports whether id is remembered.
func (r *RecentIDs) Contains(id string) bool {
	_, ok := r.set[id]
	return ok
}

// Len returns the number of ids remembered.
func (r *RecentIDs) Len() int { return len(r.set) }
