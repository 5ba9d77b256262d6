package storm

import "time"

// wake is a client's next dial in virtual time.
type wake struct {
	at time.Duration
	id int32
}

// queue is a min-heap of wake-ups for container/heap. Ties are broken by
// client id so that the order of events, and with it the order in which
// clients draw from the shared random source, is fully determined by the
// seed: two runs of the same configuration are identical.
type queue []wake

func (q queue) Len() int { return len(q) }

func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].id < q[j].id
}

func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }

func (q *queue) Push(x any) { *q = append(*q, x.(wake)) }

func (q *queue) Pop() any {
	old := *q
	w := old[len(old)-1]
	*q = old[:len(old)-1]
	return w
}
