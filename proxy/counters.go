package proxy

import (
	"sync/atomic"

	"github.com/tetherproxy/tether/internal/protocol"
)

// RestoreCounters are a Server's running totals of what its sessions did to
// restore the application on new upstream connections, and of the upstream
// messages they kept from the app. Every message tether sends on the app's
// behalf or keeps from it is counted here (and logged at debug), so nothing
// disappears silently; cmd/tether can export them as metrics.
type RestoreCounters struct {
	Restores      uint64 // connections restored and made live
	AuthSent      uint64 // login messages re-sent first on a connection
	AuthTimeouts  uint64 // restores failed for want of the login reply
	Replayed      uint64 // replay-log messages sent by restores
	Flushed       uint64 // queued app messages sent by restores
	Resent        uint64 // unacknowledged messages re-sent by restores
	HiddenReplies uint64 // replies to replayed requests, login included, kept from the app
	HiddenRepeats uint64 // TETHER_HIDE_ON_RECONNECT_MATCH messages kept from the app
	DuplicateAcks uint64 // repeated acknowledgements kept from the app
	ReplayLogFull uint64 // apps closed with 1013 "replay log full"
	Abandoned     uint64 // at-most-once operations lost in flight, reported to the app and not run again
}

// restoreTotals backs RestoreCounters; sessions add to it concurrently.
type restoreTotals struct {
	restores, authSent, authTimeouts, replayed, flushed, resent atomic.Uint64
	hiddenReplies, hiddenRepeats, duplicateAcks, replayLogFull  atomic.Uint64
	abandoned                                                   atomic.Uint64
}

// RestoreCounters returns a snapshot of the totals.
func (s *Server) RestoreCounters() RestoreCounters {
	t := &s.totals
	return RestoreCounters{
		Restores:      t.restores.Load(),
		AuthSent:      t.authSent.Load(),
		AuthTimeouts:  t.authTimeouts.Load(),
		Replayed:      t.replayed.Load(),
		Flushed:       t.flushed.Load(),
		Resent:        t.resent.Load(),
		HiddenReplies: t.hiddenReplies.Load(),
		HiddenRepeats: t.hiddenRepeats.Load(),
		DuplicateAcks: t.duplicateAcks.Load(),
		ReplayLogFull: t.replayLogFull.Load(),
		Abandoned:     t.abandoned.Load(),
	}
}

// hidden counts one upstream message kept from the app, by reason.
func (t *restoreTotals) hidden(reason protocol.Hide) {
	switch reason {
	case protocol.HideLoginReply, protocol.HideReply:
		t.hiddenReplies.Add(1)
	case protocol.HideRepeat:
		t.hiddenRepeats.Add(1)
	case protocol.HideAck:
		t.duplicateAcks.Add(1)
	}
}
