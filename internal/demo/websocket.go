package demo

import (
	"context"
	"fmt"
	"net"
)

// confirmMatch confirms an upstream connection on the feed's welcome, so
// the backoff counter resets as soon as the feed proves it is serving.
const confirmMatch = `{"t":"welcome"}`

// tether logs the client's subscription (keyed by channel) and replays it
// on every new connection, hides the answer to that replay (the client
// already has its own, matched by request id) and every welcome after the
// first.
const (
	subscribeMatch       = `{"t":"sub"}`
	subscriptionKey      = "channel"
	replyIDPath          = "id"
	hideOnReconnectMatch = `{"t":"welcome"}`
)

// tether asks the feed to resume after the last event on every new
// connection, accepts a snapshot when the feed can no longer replay, and
// fetches what a live connection missed over HTTP: docs/design.md's
// resume-protocol example, plus the catch-up endpoint.
const (
	sessionMatch  = `{"t":"welcome"}`
	sessionPath   = "session"
	resumeMessage = `{"t":"resume","session":{{json .Session}},"after":{{.LastSeq}}}`
	resyncMatch   = `{"t":"welcome","resync":true}`
)

// webSocketMode is `tether demo`: the WebSocket feed (ws_feed.go) and the
// naive client (ws_client.go).
func webSocketMode() mode {
	return mode{
		words: words{
			title:          "tether demo: a flaky price feed, tether in front of it, and a naive client that connects once and never reconnects.",
			app:            srcClient,
			conn:           "socket",
			link:           "connection",
			attempt:        "dial",
			ends:           "closes",
			appConnected:   "accepted the client's connection: from now on tether keeps it open, whatever the upstream does",
			firstConfirmed: "upstream connected; the feed's welcome confirmed it",
			silence:        "half-open detected: no frame",
			idleLimit:      "ping interval %s + timeout %s",
			cutShort:       "connection closed without a close frame",
			gapWait:        "fetching the missing events over HTTP",
			kept:           "the client's one socket",
			lost:           "the client's socket was closed",
			stopping:       "the client closes its socket with 1000",
			gone:           "the client's socket is gone",
			errLost:        ErrClientClosed,
			epilogue: []string{
				"  on every new connection tether asked the feed to resume after the client's last event and replayed the",
				"  subscription; it fetched what a live connection missed over HTTP, dropped duplicates, and hid the",
				"  feed's repeated welcomes and answers.",
			},
			header: func(s settings) []string {
				return []string{
					fmt.Sprintf("  tether: ping after %s of upstream silence, dead %s later; backoff full jitter %s..%s; "+
						"at least %s after 1012, %s after 1013",
						fmtSetting(s.pingInterval), fmtSetting(s.pingTimeout), fmtSetting(s.backoffBase),
						fmtSetting(s.backoffCap), fmtSetting(s.restartFloor), fmtSetting(s.tryAgainFloor)),
					fmt.Sprintf("  tether: events sequenced by seq (duplicates dropped, what follows a gap held); "+
						"resume after the last event on every new connection; gaps fetched over HTTP, given up after %s with a notice",
						fmtSetting(s.gapTimeout)),
				}
			},
		},
		repertoire: []fault{
			{faultReset, "TCP reset", "TCP resets", "TCP reset: the feed aborts the upstream connection (RST)"},
			{faultStall, "half-open", "half-opens", "half-open: the feed goes silent (no events, no pongs) but keeps TCP open"},
			{faultRestart, "server restart", "server restarts", fmt.Sprintf(
				`server restart: the feed closes with 1012 "service restart" and answers HTTP 502 for %s`, fmtSetting(restartDowntime))},
			{faultOverload, "overload", "overloads", fmt.Sprintf(`overload: the feed sheds the connection with 1013 "try again later" `+
				`and refuses the next %d handshakes (HTTP 503, Retry-After: 1)`, overloadRefusals)},
			{faultHiccup, "hiccup", "hiccups", fmt.Sprintf(
				"hiccup: the feed drops the next %d events on the live connection, then repeats %d it had sent", hiccupDrop, hiccupRepeat)},
		},
		start: startWebSocket,
		dial:  dialWebSocket,
	}
}

// startWebSocket starts the feed and configures tether for it.
func startWebSocket(opts feedOptions) (feed, map[string]string, error) {
	f, err := startWSFeed(opts)
	if err != nil {
		return nil, nil, err
	}
	opts.narr.say(srcFeed, "price feed up at %s: a welcome with a session id, then %d numbered events/s; "+
		"it keeps %ds of them for resumes and for HTTP catch-up at %s", f.URL(), opts.rate, replayWindow, f.CatchUpURL())
	env := tetherEnv(f.URL(), "127.0.0.1:0", confirmMatch, demoSettings)
	for k, v := range map[string]string{
		"TETHER_RESTART_FLOOR":   demoSettings.restartFloor.String(),
		"TETHER_TRY_AGAIN_FLOOR": demoSettings.tryAgainFloor.String(),

		"TETHER_SUBSCRIBE_MATCH":         subscribeMatch,
		"TETHER_SUBSCRIPTION_KEY":        subscriptionKey,
		"TETHER_REPLY_ID_PATH":           replyIDPath,
		"TETHER_HIDE_ON_RECONNECT_MATCH": hideOnReconnectMatch,

		"TETHER_SESSION_MATCH":   sessionMatch,
		"TETHER_SESSION_PATH":    sessionPath,
		"TETHER_RESUME_MESSAGE":  resumeMessage,
		"TETHER_RESYNC_MATCH":    resyncMatch,
		"TETHER_RESYNC_SEQ_PATH": seqPath,
		"TETHER_GAPFILL_URL":     f.CatchUpURL() + "?from={{.From}}&to={{.To}}",
	} {
		env[k] = v
	}
	return f, env, nil
}

// dialWebSocket connects the client to tether.
func dialWebSocket(ctx context.Context, addr net.Addr, rate int, n *narrator) (app, error) {
	url := "ws://" + addr.String() + "/"
	c, err := dialClient(ctx, url, rate, n)
	if err != nil {
		return nil, err
	}
	n.say(srcClient, "connected to tether at %s and sent %s; it will never reconnect", url, subMessage)
	return c, nil
}
