package metrics

import (
	"strconv"

	"github.com/tetherproxy/tether/internal/labels"
)

// Label values. Each set is bounded; values are pre-created at zero in New so
// that rate() and increase() see a series before its first event.
var (
	// dialResults are the outcomes of an upstream dial (upstream.Observer).
	dialResults = []string{
		labels.DialOK, labels.DialRefused, labels.DialTimeout, labels.DialDNS, labels.DialTLS, labels.DialNetwork,
		labels.DialHTTP401, labels.DialHTTP403, labels.DialHTTP429, labels.DialHTTP5xx, labels.DialHTTP4xx, labels.DialHTTPOther,
		labels.DialBadURL, labels.DialToken, labels.DialSubprotocol, labels.DialHandshake, labels.DialProxy, labels.DialProxyAuth,
	}
	// lossReasons are why an open upstream connection ended
	// (upstream.Observer); "close" comes with a close code label.
	lossReasons = []string{
		labels.LossClose, labels.LossReset, labels.LossEOF, labels.LossHeartbeat, labels.LossProtocol, labels.LossRestore, labels.LossNetwork,
	}
	// rejectionReasons are why an app's WebSocket handshake was refused, or
	// a tcp:// app on accept (max_sessions, draining, upstream_permanent).
	rejectionReasons = []string{
		labels.RejectMaxSessions, labels.RejectDraining, labels.RejectUpstreamPermanent, labels.RejectBadRequest,
		labels.RejectTimeout, labels.RejectAborted, labels.RejectOrigin, labels.RejectHost,
		labels.RejectHeadersTooLarge, labels.RejectPath,
	}
)

// The label values of the proxy's events are internal/labels': the proxy
// reports them and this package pre-creates them from one definition.
var (
	gapOutcomes     = []string{labels.GapFilled, labels.GapResync, labels.GapClosed, labels.GapSkipped, labels.GapNotified, labels.GapEpoch, labels.GapRestart, labels.GapResyncFailed}
	recoveryMethods = []string{labels.RecoveryResume, labels.RecoveryHTTP, labels.RecoveryResync}
	directions      = [...]string{labels.DirectionAppToUpstream, labels.DirectionUpstreamToApp}
	listenerKinds   = [...]string{labels.ListenerWS, labels.ListenerUnix, labels.ListenerTCP, labels.ListenerSSE}
	sseResumes      = []string{labels.SSEResumed, labels.SSEEvicted, labels.SSESessionGone, labels.SSEForeignID, labels.SSEUpstream}
	dropReasons     = []string{labels.DropTooLarge, labels.DropInvalidUTF8, labels.DropUnterminated, labels.DropBinary, labels.DropNewline, labels.DropReadOnly, labels.DropUnframed, labels.DropEnded, labels.DropUnsent, labels.DropStale, labels.DropKeepalive}
)

// codeNone is the code label of a disconnect without a close frame.
const codeNone = "none"

// CloseCodeLabel folds a WebSocket close code into a bounded label value:
//
//   - 1000-1015, the codes RFC 6455 and the IANA registry define: the number
//     ("1000", "1012"), because each means something different to an operator;
//   - 3000-4999, registered and private application codes: "permanent" when
//     permanent(code) (TETHER_PERMANENT_CODES), "reauth" when reauth(code)
//     (TETHER_REAUTH_CODES), otherwise "3xxx" or "4xxx";
//   - 0 (no close frame): "none";
//   - anything else: "other".
//
// At most 16 + 5 + 1 values, whatever the upstream sends. nil predicates
// match nothing.
func CloseCodeLabel(code int, permanent, reauth func(int) bool) string {
	switch {
	case code == 0:
		return codeNone
	case code >= 1000 && code <= 1015:
		return strconv.Itoa(code)
	case code >= 3000 && code <= 4999:
		return applicationCodeLabel(code, permanent, reauth)
	}
	return "other"
}

func applicationCodeLabel(code int, permanent, reauth func(int) bool) string {
	switch {
	case permanent != nil && permanent(code):
		return "permanent"
	case reauth != nil && reauth(code):
		return "reauth"
	case code < 4000:
		return "3xxx"
	}
	return "4xxx"
}
