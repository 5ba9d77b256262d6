package demo

import (
	"io"
	"testing"
)

// reached is closed once the app holds every event up to the number, or a
// snapshot or a gap notice stood in for the missing ones; a duplicate is
// no progress.
func TestLedgerReached(t *testing.T) {
	l := newLedger(wsNarrator(io.Discard), 20)
	isClosed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	two, five, eight, twelve := l.reached(2), l.reached(5), l.reached(8), l.reached(12)
	l.message([]byte(`{"t":"welcome","session":"s","seq":0}`), "")
	l.message([]byte(`{"t":"event","seq":1}`), "")
	if isClosed(two) {
		t.Fatal("reached(2) closed at event 1")
	}
	l.message([]byte(`{"t":"event","seq":2}`), "")
	if !isClosed(two) || isClosed(five) {
		t.Fatalf("at event 2: reached(2) closed %t, reached(5) closed %t; want true, false", isClosed(two), isClosed(five))
	}
	if !isClosed(l.reached(1)) {
		t.Error("reached(1) asked after event 2 is not closed at once")
	}
	l.message([]byte(`{"t":"gap","from":3,"to":5}`), "")
	if !isClosed(five) {
		t.Error("a gap notice for 3–5 did not close reached(5)")
	}
	l.message([]byte(`{"t":"snapshot","at":8}`), "")
	if !isClosed(eight) || isClosed(twelve) {
		t.Errorf("after a snapshot at 8: reached(8) closed %t, reached(12) closed %t; want true, false",
			isClosed(eight), isClosed(twelve))
	}
	l.message([]byte(`{"t":"event","seq":7}`), "") // a duplicate: no progress
	if isClosed(twelve) {
		t.Error("a duplicate closed reached(12)")
	}
}
