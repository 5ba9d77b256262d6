package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/caarlos0/env/v11"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/internal/protocol/graphqlws"
	"github.com/tetherproxy/tether/internal/rules"
	"github.com/tetherproxy/tether/internal/sequence"
	"github.com/tetherproxy/tether/internal/template"
	"github.com/tetherproxy/tether/proxy"
	"github.com/tetherproxy/tether/upstream"
)

// Prefix starts every variable tether reads.
const Prefix = "TETHER_"

// maxMessageLimit caps TETHER_MAX_MESSAGE_BYTES: a larger message is almost
// certainly a misconfiguration, and one such message per session times
// TETHER_MAX_SESSIONS would exhaust any sidecar's memory limit.
const maxMessageLimit = GiB

// Config is tether's whole configuration, read from TETHER_* variables by
// Load. Each field's env tag names its variable (after the TETHER_
// prefix), envDefault its default, and help the line printed by --help and in
// docs/configuration.md. Adding a variable means adding a field here: parsing,
// --help, that table and the unknown-variable check follow from the tags.
type Config struct {
	// UpstreamURL is the upstream endpoint: ws:// or wss:// for a WebSocket
	// server, http:// or https:// for a Server-Sent Events stream. Required.
	UpstreamURL *url.URL `env:"UPSTREAM_URL,required,notEmpty" help:"upstream URL: ws:// or wss:// (WebSocket), http:// or https:// (Server-Sent Events)"`

	// UpstreamKind is websocket or sse. Default unset: inferred from
	// UpstreamURL's scheme (http and https mean sse). A value that
	// contradicts the scheme is refused.
	UpstreamKind kindSetting `env:"UPSTREAM_KIND" help:"websocket or sse; unset, inferred from TETHER_UPSTREAM_URL (http:// and https:// are sse)"`

	// SSEFormat says what each event of an SSE upstream becomes for the app:
	// json, the text message {"id":…,"event":…,"data":…} (three strings), or
	// data, the event's data alone. Default json.
	SSEFormat upstream.SSEFormat `env:"SSE_FORMAT" envDefault:"json" help:"SSE upstreams, what each event becomes: json (a JSON object with the string members id, event and data) or data (the event's data alone)"`

	// Listen lists where apps connect, comma-separated: host:port or
	// ws://host:port (WebSocket), tcp://host:port (one text message per
	// line), unix:///absolute/path (WebSocket over a unix socket; not on
	// Windows). All share the upstream configuration. Default
	// 127.0.0.1:8080. A non-loopback host exposes the proxy, and with it the
	// upstream credentials, to the network.
	Listen ListenList `env:"LISTEN" envDefault:"127.0.0.1:8080" help:"where apps connect, comma-separated: host:port or ws://host:port (WebSocket), tcp://host:port (one message per line), unix:///path (WebSocket over a unix socket), sse://host:port/path (Server-Sent Events to EventSource apps; the path defaults to /)"`

	// TCPBinary says what an upstream binary message becomes on a tcp://
	// listener, whose lines carry text: base64 (one line holding the message
	// in standard base64), drop (logged and counted) or close (the app's
	// connection). Default base64.
	TCPBinary proxy.BinaryPolicy `env:"TCP_BINARY" envDefault:"base64" help:"tcp:// listeners, an upstream binary message: base64 (sent as one base64 line), drop, or close (the app's connection)"`

	// TCPNewline says what an upstream text message holding a line break
	// becomes on a tcp:// listener, where a line break ends a message: space
	// (each CR and LF replaced by a space), drop or close. Default space.
	TCPNewline proxy.NewlinePolicy `env:"TCP_NEWLINE" envDefault:"space" help:"tcp:// listeners, an upstream text message containing a line break: space (each CR and LF becomes a space), drop, or close (the app's connection)"`

	// UnixSocketMode is the permission bits given to unix:// sockets, in
	// octal; whoever may connect needs write permission. Default 0600: only
	// tether's own user.
	UnixSocketMode SocketMode `env:"UNIX_SOCKET_MODE" envDefault:"0600" help:"permission bits of unix:// sockets, octal; connecting needs write permission"`

	// SSELinger is how long an sse:// session waits, keeping its upstream
	// connection and its events, for its app's EventSource to reconnect
	// with Last-Event-ID; 0 ends a session with its app's request.
	// Default 30s, well above the 3–5 s browsers wait before reconnecting.
	SSELinger time.Duration `env:"SSE_LINGER" envDefault:"30s" help:"sse:// listeners: how long a session waits, with its upstream connection and its events, for its app to reconnect with Last-Event-ID; 0 ends it with the app's request"`

	// AdminListen is the host:port of /healthz, /readyz, /metrics and the
	// status page (/ and /status); "off" (stored as "") disables the admin
	// server. Default 127.0.0.1:9090.
	AdminListen AdminAddr `env:"ADMIN_LISTEN" envDefault:"127.0.0.1:9090" help:"address of /healthz, /readyz, /metrics and the status page (/, /status), host:port or off"`

	// ForwardPath, when true, joins the path and query of each app's
	// WebSocket handshake onto UpstreamURL, so one tether serves apps that
	// use several upstream endpoints. Default false: every app gets
	// UpstreamURL as written. tcp:// apps have no path and always get it.
	ForwardPath bool `env:"FORWARD_PATH" envDefault:"false" help:"when true, the path and query of the app's handshake are joined onto TETHER_UPSTREAM_URL"`

	// ReadyRequiresUpstream makes /readyz also require a successful upstream
	// probe dial (a WebSocket handshake with the sessions' credentials and TLS,
	// closed with 1000 at once; for SSE a request answered with an event
	// stream, ended at once; the result is cached for readyProbeTTL).
	// Default false: an upstream outage would otherwise take a sidecar's pod
	// out of its Services, although its app keeps its socket (docs/kubernetes.md
	// "Health and readiness").
	ReadyRequiresUpstream bool `env:"READY_REQUIRES_UPSTREAM" envDefault:"false" help:"when true, /readyz also needs a successful upstream probe dial (cached for 5s)"`

	// AllowedOrigins lists the web pages allowed to connect, by the Origin
	// header of their handshake: comma-separated exact origins such as
	// http://localhost:3000 (scheme and host compared case-insensitively,
	// default ports dropped); "*" alone allows any. Default none: handshakes
	// without Origin (native apps) are accepted, any other Origin is refused
	// with 403, pages served from localhost included (docs/security.md).
	AllowedOrigins originList `env:"ALLOWED_ORIGINS" help:"origins of web pages allowed to connect, comma-separated (http://localhost:3000), or * for any; native apps send none and are always accepted"`

	// UpstreamHeaders are static request headers for every upstream dial:
	// "Name: value" entries separated by newlines, or on one line by commas that
	// precede the next "Name:". Default none. Host, Connection, Upgrade and
	// Sec-WebSocket-* are refused: the WebSocket handshake owns them.
	UpstreamHeaders headerList `env:"UPSTREAM_HEADERS" help:"extra upstream request headers, Name: value entries separated by newlines or commas"`

	// UpstreamTokenFile is a file holding a bearer token, re-read on every dial
	// and sent as "Authorization: Bearer …". Default none. Checked readable and
	// non-empty at start: a typo should fail now, not as endless 401 retries.
	UpstreamTokenFile string `env:"UPSTREAM_TOKEN_FILE" help:"file with a bearer token, re-read on every dial"`

	// UpstreamCAFile is a PEM bundle that replaces the system roots for
	// verifying the upstream's certificate. Default: system roots.
	UpstreamCAFile string `env:"UPSTREAM_CA_FILE" help:"PEM CA bundle that verifies the upstream instead of the system roots"`

	// UpstreamCertFile and UpstreamKeyFile are a PEM client certificate and key
	// for mutual TLS; both or neither. Default none.
	UpstreamCertFile string `env:"UPSTREAM_CERT_FILE" help:"PEM client certificate for mutual TLS (with TETHER_UPSTREAM_KEY_FILE)"`
	UpstreamKeyFile  string `env:"UPSTREAM_KEY_FILE" help:"PEM private key of TETHER_UPSTREAM_CERT_FILE"`

	// UpstreamProxy is the HTTP proxy of every upstream request (a CONNECT
	// tunnel for WebSocket upstreams; SSE, TETHER_GAPFILL_URL fetches and
	// the readiness probe alike), loopback upstreams included:
	// http://host:port or https://host:port, credentials as
	// http://user:password@host:port (sent as Proxy-Authorization: Basic,
	// never logged); off connects directly. Default unset: HTTPS_PROXY,
	// HTTP_PROXY and NO_PROXY as Go's net/http reads them, which never
	// proxies a loopback upstream.
	UpstreamProxy proxySetting `env:"UPSTREAM_PROXY" help:"HTTP proxy of every upstream request, loopback ones included: http://[user:password@]host:port, or off; unset, HTTPS_PROXY, HTTP_PROXY and NO_PROXY apply as in Go's net/http"`

	// UpstreamCompression is auto (offer permessage-deflate to a WebSocket
	// upstream and use it when accepted, as negotiated; inflating a message
	// past TETHER_MAX_MESSAGE_BYTES closes it as too large) or off. The app
	// side is never compressed. Default auto.
	UpstreamCompression upstream.Compression `env:"UPSTREAM_COMPRESSION" envDefault:"auto" help:"auto (offer permessage-deflate to a WebSocket upstream, used when it accepts) or off; the app side is never compressed"`

	// DialTimeout bounds one upstream connect + TLS + handshake (for SSE:
	// until the response headers). Default 10s.
	DialTimeout time.Duration `env:"DIAL_TIMEOUT" envDefault:"10s" help:"limit for one upstream connect, TLS and WebSocket handshake (SSE: until the response headers)"`

	// AcceptWait is how long an app handshake waits for the first upstream dial
	// before the app is accepted anyway. Default 2s; 0 accepts at once.
	AcceptWait time.Duration `env:"ACCEPT_WAIT" envDefault:"2s" help:"how long an app handshake waits for the upstream before it is accepted anyway"`

	// BackoffBase is the ceiling of the first reconnect delay. Default 500ms.
	BackoffBase time.Duration `env:"BACKOFF_BASE" envDefault:"500ms" help:"ceiling of the first reconnect delay, doubled per attempt"`

	// BackoffCap is the largest reconnect delay ceiling; ≥ BackoffBase. Default 30s.
	BackoffCap time.Duration `env:"BACKOFF_CAP" envDefault:"30s" help:"largest reconnect delay ceiling"`

	// BackoffJitter is full, equal or decorrelated (none: tests only). Default full.
	BackoffJitter upstream.Jitter `env:"BACKOFF_JITTER" envDefault:"full" help:"reconnect delay randomisation: full, equal, decorrelated or none (tests only)"`

	// StableAfter is how long a connection must stay open to count as
	// confirmed when ConfirmMatch is unset. Default 10s.
	StableAfter time.Duration `env:"STABLE_AFTER" envDefault:"10s" help:"time open after which a connection counts as confirmed, when TETHER_CONFIRM_MATCH is unset"`

	// ConfirmMatch, when set, confirms a connection (and resets the backoff
	// attempt counter) on the first upstream message matching it. Default unset.
	ConfirmMatch *rules.Matcher `env:"CONFIRM_MATCH" help:"upstream message pattern that confirms a connection and resets the backoff"`

	// RestartFloor is the least delay after upstream close 1012. Default 5s.
	RestartFloor time.Duration `env:"RESTART_FLOOR" envDefault:"5s" help:"least reconnect delay after close code 1012 (service restart)"`

	// TryAgainFloor is the least delay after upstream close 1013. Default 15s.
	TryAgainFloor time.Duration `env:"TRY_AGAIN_FLOOR" envDefault:"15s" help:"least reconnect delay after close code 1013 (try again later)"`

	// MaxAttempts is how many consecutive failed attempts end a session with
	// 1011; 0 means never give up. Default 0.
	MaxAttempts int `env:"MAX_ATTEMPTS" envDefault:"0" help:"consecutive failed reconnects before the app is closed with 1011; 0 retries forever"`

	// AuthFailuresMax is how many consecutive HTTP 401/403 answers (or
	// refusals of the proxy credentials, 407) end a session with 1008.
	// Default 3.
	AuthFailuresMax int `env:"AUTH_FAILURES_MAX" envDefault:"3" help:"consecutive HTTP 401/403 handshakes (or HTTP proxy 407s) before the app is closed with 1008"`

	// PermanentCodes are upstream close codes that end the session (the app is
	// closed with the same code). Default upstream.DefaultPermanentCodes.
	// Unlike other variables, set empty (or blank) it means no codes; set, it
	// takes the codes it shares with the default of ReauthCodes
	// (resolveCodeLists). 1005, 1006 and 1015 are refused: no close frame
	// carries them.
	PermanentCodes upstream.CodeSet `env:"PERMANENT_CODES" envDefault:"1002,1003,1007,1008,1009,1010" help:"upstream close codes passed to the app instead of reconnecting; ranges like 4500-4999 allowed"`

	// ReauthCodes are upstream close codes after which credentials are re-read
	// before reconnecting. Default upstream.DefaultReauthCodes. Set empty, no
	// codes; set, it takes the codes it shares with the default of
	// PermanentCodes; both set, they must not share one.
	ReauthCodes upstream.CodeSet `env:"REAUTH_CODES" envDefault:"4001,4003" help:"upstream close codes that re-read credentials before reconnecting"`

	// PingInterval is the inbound silence after which a ping is sent; 0
	// disables the heartbeat (dead connections are then found only by TCP).
	// An SSE upstream gets no ping: PingInterval + PingTimeout of silence
	// (not even a comment) is its idle timeout. Default 15s.
	PingInterval time.Duration `env:"PING_INTERVAL" envDefault:"15s" help:"upstream silence before a ping is sent; 0 disables the heartbeat (SSE has no ping: this plus TETHER_PING_TIMEOUT of silence is its idle timeout)"`

	// PingTimeout is how long after a ping silence means a dead connection.
	// Must be ≥ 0, and > 0 when PingInterval > 0. Default 10s.
	PingTimeout time.Duration `env:"PING_TIMEOUT" envDefault:"10s" help:"silence after a ping that declares the upstream dead"`

	// HeartbeatMessage, when set, is sent as a text message instead of a
	// WebSocket ping. Default unset.
	HeartbeatMessage string `env:"HEARTBEAT_MESSAGE" help:"text message sent instead of a WebSocket ping"`

	// HeartbeatReplyMatch matches heartbeat replies, which count as liveness
	// and are not forwarded to the app. Default unset.
	HeartbeatReplyMatch *rules.Matcher `env:"HEARTBEAT_REPLY_MATCH" help:"upstream message pattern of heartbeat replies, hidden from the app"`

	// Protocol picks how messages are read: rules (the TETHER_* rules
	// below) or a preset that sets the whole restore behaviour of its
	// protocol: graphql-ws (graphql-transport-ws), graphql-ws-legacy
	// (subscriptions-transport-ws), centrifuge (the Centrifugo JSON
	// protocol), stomp (STOMP 1.2), nats (the NATS client protocol), mqtt
	// (MQTT 3.1.1 and 5 over WebSocket); preset.go. Default rules.
	Protocol protocolName `env:"PROTOCOL" envDefault:"rules" help:"rules (the TETHER_* message rules) or a protocol preset: graphql-ws, graphql-ws-legacy, centrifuge, stomp, nats, mqtt; a preset refuses the rule variables it sets itself"`

	// GraphQLRerun, under TETHER_PROTOCOL=graphql-ws or
	// graphql-ws-legacy, says which operations in flight on a lost
	// connection are sent again: none (queries and mutations run at most
	// once; the app gets an error for each), queries, or all. Default none.
	GraphQLRerun graphqlws.Rerun `env:"GRAPHQL_RERUN" envDefault:"none" help:"TETHER_PROTOCOL=graphql-ws or graphql-ws-legacy: none, queries or all; the operations in flight on a lost connection that are sent again (the others end with an error)"`

	// AuthMatch matches the app's login message; the latest one is sent
	// first on every reconnect. Default unset.
	AuthMatch *rules.Matcher `env:"AUTH_MATCH" help:"app message pattern of the login message, re-sent first on every reconnect"`

	// AuthOKMatch matches the upstream's reply to a successful login. When
	// set, a reconnect waits for it (at most DialTimeout) before replaying
	// anything else; no reply fails the attempt. Needs AuthMatch. Default unset.
	AuthOKMatch *rules.Matcher `env:"AUTH_OK_MATCH" help:"upstream reply pattern of a successful login; reconnects wait for it (at most TETHER_DIAL_TIMEOUT)"`

	// SubscribeMatch matches the app's subscribe messages, logged and
	// replayed after the login on every reconnect. Default unset.
	SubscribeMatch *rules.Matcher `env:"SUBSCRIBE_MATCH" help:"app message pattern of subscriptions, replayed on every reconnect"`

	// UnsubscribeMatch matches the app's unsubscribe messages, logged with
	// the subscribes. Needs SubscribeMatch. Default unset.
	UnsubscribeMatch *rules.Matcher `env:"UNSUBSCRIBE_MATCH" help:"app message pattern of unsubscriptions, logged with the subscriptions"`

	// SubscriptionKey is the path of the value naming a subscription: an
	// unsubscribe cancels the subscribe with the same value, and a repeated
	// subscribe replaces the earlier one. Needs SubscribeMatch. Default
	// unset: the log replays every subscribe and unsubscribe in order.
	SubscriptionKey rules.Path `env:"SUBSCRIPTION_KEY" help:"path of the value naming a subscription, so an unsubscribe cancels its subscribe in the replay log"`

	// ReplyIDPath is the path of the request id that replies echo: replies
	// to requests tether replayed, whose answer the app has already seen,
	// are hidden. Needs AuthMatch or SubscribeMatch. Default unset.
	ReplyIDPath rules.Path `env:"REPLY_ID_PATH" help:"path of the request id echoed by replies; replies to replayed requests are hidden from the app"`

	// HideOnReconnectMatch matches upstream messages the app sees only once
	// (a welcome): later ones are hidden. Default unset.
	HideOnReconnectMatch *rules.Matcher `env:"HIDE_ON_RECONNECT_MATCH" help:"upstream message pattern the app sees once; repeats after reconnects are hidden"`

	// AckIDPath is the path of the id of app messages that wait for an
	// acknowledgement and are re-sent after a reconnect until it arrives.
	// Needs AckMatch. Default unset.
	AckIDPath rules.Path `env:"ACK_ID_PATH" help:"path of the id of app messages kept until acknowledged (with TETHER_ACK_MATCH)"`

	// AckMatch matches the upstream's acknowledgements, which carry the id at
	// AckIDPath; a repeated one is not forwarded. Needs AckIDPath. Default
	// unset.
	AckMatch *rules.Matcher `env:"ACK_MATCH" help:"upstream message pattern of acknowledgements, carrying the id at TETHER_ACK_ID_PATH"`

	// SubscriptionEndMatch matches an upstream message that ends the
	// subscription whose key it carries at SubscriptionKey (a graphql-ws
	// complete): it is no longer replayed. Needs SubscriptionKey. Default
	// unset.
	SubscriptionEndMatch *rules.Matcher `env:"SUBSCRIPTION_END_MATCH" help:"upstream message pattern that ends the subscription whose key (at TETHER_SUBSCRIPTION_KEY) it carries; no longer replayed"`

	// AppPingMatch matches the app's own keepalive (a graphql-ws ping),
	// answered by tether with AppPongMessage while the upstream is down.
	// Needs AppPongMessage. Default unset.
	AppPingMatch *rules.Matcher `env:"APP_PING_MATCH" help:"app message pattern of the app's keepalive, answered with TETHER_APP_PONG_MESSAGE while the upstream is down"`

	// AppPongMessage is tether's text answer to an AppPingMatch message
	// while the upstream is down; an upstream message like it (as a
	// pattern when it is a JSON object) is the upstream's answer. Needs
	// AppPingMatch. Default unset.
	AppPongMessage string `env:"APP_PONG_MESSAGE" help:"text message answering TETHER_APP_PING_MATCH while the upstream is down"`

	// AppKeepaliveMessage is a text message sent to the app every
	// AppKeepaliveInterval while the upstream is down, as its server would
	// (a subscriptions-transport-ws ka). Needs AppKeepaliveInterval.
	// Default unset.
	AppKeepaliveMessage string `env:"APP_KEEPALIVE_MESSAGE" help:"text message sent to the app every TETHER_APP_KEEPALIVE_INTERVAL while the upstream is down"`

	// AppKeepaliveInterval is how often AppKeepaliveMessage goes to the
	// app while the upstream is down; > 0. Needs AppKeepaliveMessage.
	// Default unset.
	AppKeepaliveInterval time.Duration `env:"APP_KEEPALIVE_INTERVAL" help:"how often TETHER_APP_KEEPALIVE_MESSAGE is sent to the app while the upstream is down"`

	// Framing is none (one WebSocket message is one message) or ndjson
	// (a text message holds '\n'-separated records, each read and
	// delivered on its own). Default none.
	Framing protocol.FramingMode `env:"FRAMING" envDefault:"none" help:"none, or ndjson: a text message may hold several newline-separated records, each read and delivered on its own"`

	// SubscribeReplay is a template that rewrites a keyed subscribe on
	// replay when its stream (named as its key) has delivered numbers,
	// with .Stream .LastSeq .Epoch .Message. Needs SubscriptionKey and SeqPath.
	// Default unset: replayed as the app sent it.
	SubscribeReplay template.SubscribeReplay `env:"SUBSCRIBE_REPLAY" help:"template rewriting a replayed subscribe from its stream's last number, with .Stream .LastSeq .Epoch .Message (get reads the message)"`

	// SessionMatch matches the upstream message carrying the server's
	// session id (a welcome), read at SessionPath: .Session in ResumeMessage
	// and GapFillURL. Needs SessionPath. Default unset.
	SessionMatch *rules.Matcher `env:"SESSION_MATCH" help:"upstream message pattern carrying the server's session id (at TETHER_SESSION_PATH)"`

	// SessionPath is the path of the session id in messages matching
	// SessionMatch. Needs SessionMatch. Default unset.
	SessionPath rules.Path `env:"SESSION_PATH" help:"path of the session id in messages matching TETHER_SESSION_MATCH"`

	// ResumeMessage is a template sent after the login on every reconnect,
	// rendered with .Session, .LastSeq and .Stream, once per known stream
	// when StreamPath is set. Needs SeqPath. Default unset.
	ResumeMessage template.ResumeMessage `env:"RESUME_MESSAGE" help:"message template sent after the login on every reconnect, with .Session .LastSeq .Stream (once per stream)"`

	// SeqPath is the path of the integer sequence number of upstream
	// messages: duplicates are dropped, successors of a gap held until it is
	// filled. Default unset: nothing is sequenced.
	SeqPath rules.Path `env:"SEQ_PATH" help:"path of the sequence number of upstream messages; duplicates are dropped, gaps held and filled"`

	// SeqModel is how the feed numbers its messages: next (each message
	// L+1), range (a message covers SeqFirstPath to SeqPath), chain (a
	// message names its predecessor at SeqPrevPath) or increasing (any
	// larger number; gaps cannot be seen). Needs SeqPath. Default next.
	SeqModel buffer.Model `env:"SEQ_MODEL" envDefault:"next" help:"how upstream messages are numbered: next (L+1), range (TETHER_SEQ_FIRST_PATH..TETHER_SEQ_PATH), chain (TETHER_SEQ_PREV_PATH names the previous), increasing"`

	// SeqFirstPath is the path of the first number a message covers, under
	// SeqModel range (Binance depth's U). Required then. Default unset.
	SeqFirstPath rules.Path `env:"SEQ_FIRST_PATH" help:"path of the first number an upstream message covers, for TETHER_SEQ_MODEL=range"`

	// SeqPrevPath is the path of the number of the message before, under
	// SeqModel chain (Deribit's prev_change_id). Required then. Default
	// unset.
	SeqPrevPath rules.Path `env:"SEQ_PREV_PATH" help:"path of the number of the previous upstream message, for TETHER_SEQ_MODEL=chain"`

	// SeqScope is where numbers count: stream (per stream, across
	// upstream connections) or connection (they start over on each new
	// connection: duplicates are dropped within one, continuity across
	// connections is not claimed). Needs SeqPath. Default stream.
	SeqScope proxy.SeqScope `env:"SEQ_SCOPE" envDefault:"stream" help:"where upstream sequence numbers count: stream (across connections) or connection (they restart on each)"`

	// StreamPath is the path of the stream each number belongs to; streams
	// are sequenced apart. Needs SeqPath. Default unset: one stream.
	StreamPath rules.Path `env:"STREAM_PATH" help:"path of the stream each sequence number belongs to; unset, all share one"`

	// ResyncMatch matches an upstream message (a snapshot, a welcome with
	// resync:true) that resets its stream to the number at ResyncSeqPath.
	// Needs SeqPath and ResyncSeqPath. Default unset.
	ResyncMatch *rules.Matcher `env:"RESYNC_MATCH" help:"upstream message pattern (a snapshot) that resets its stream to the number at TETHER_RESYNC_SEQ_PATH"`

	// ResyncSeqPath is the path of the number a ResyncMatch message, or a
	// ResyncURL snapshot, resets its stream to. Needs ResyncMatch or
	// ResyncURL. Default unset.
	ResyncSeqPath rules.Path `env:"RESYNC_SEQ_PATH" help:"path of the number a TETHER_RESYNC_MATCH message or a TETHER_RESYNC_URL snapshot resets its stream to"`

	// ResyncURL is an http(s) URL template with .Stream and .Session: the
	// stream's snapshot (Binance's /api/v3/depth?symbol=...), fetched when
	// a gap cannot be filled otherwise, delivered to the app as one message
	// and resetting the stream to the number at ResyncSeqPath in it;
	// requested with the upstream's headers, token and TLS, like
	// GapFillURL. Needs SeqPath and ResyncSeqPath. Default unset.
	ResyncURL template.ResyncURL `env:"RESYNC_URL" help:"HTTP snapshot URL template with .Stream .Session, fetched when a gap cannot be filled; delivered as one message, it resets the stream to the number at TETHER_RESYNC_SEQ_PATH"`

	// EpochPath is the path of the epoch a sequence number belongs to: a
	// message whose epoch differs from its stream's starts the stream over
	// at its number (logged, counted, given to GapPolicy). Needs SeqPath.
	// Default unset.
	EpochPath rules.Path `env:"EPOCH_PATH" help:"path of the epoch of upstream sequence numbers; a new epoch restarts its stream (logged, counted, TETHER_GAP_POLICY applies)"`

	// GapFillURL is an http(s) URL template with .Stream, .From, .To and
	// .Session, answered with a JSON array or NDJSON of the missing
	// messages; requested with the upstream's headers, token and TLS. Needs
	// SeqPath. Default unset.
	GapFillURL template.GapFillURL `env:"GAPFILL_URL" help:"HTTP catch-up URL template with .Stream .From .To .Session, answered with a JSON array or NDJSON of messages"`

	// GapTimeout is how long a gap may wait to be filled. Default 5s.
	GapTimeout time.Duration `env:"GAP_TIMEOUT" envDefault:"5s" help:"how long a sequence gap may wait to be filled before TETHER_GAP_POLICY applies"`

	// GapPolicy is close (the app, with 1011), skip or notify. Default close.
	GapPolicy proxy.GapPolicy `env:"GAP_POLICY" envDefault:"close" help:"for a gap not filled in time: close (the app, with 1011), skip, or notify (TETHER_GAP_NOTICE)"`

	// GapNotice is the message template, with .Stream, .From, .To and
	// .Session, injected under GapPolicy notify. Required then. Default unset.
	GapNotice template.GapNotice `env:"GAP_NOTICE" help:"message template sent to the app for a gap given up under TETHER_GAP_POLICY=notify, with .Stream .From .To"`

	// HoldMaxBytes bounds the messages held behind gaps per session; one
	// that does not fit gets the gap policy at once. Default 8MiB.
	HoldMaxBytes ByteSize `env:"HOLD_MAX_BYTES" envDefault:"8MiB" help:"most bytes of upstream messages held behind sequence gaps per session"`

	// OutboxMaxMessages caps messages queued per session while upstream is
	// down. Default 10000.
	OutboxMaxMessages int `env:"OUTBOX_MAX_MESSAGES" envDefault:"10000" help:"most app messages queued per session while the upstream is down"`

	// OutboxMaxBytes caps the bytes of those queued messages. Default 8MiB.
	OutboxMaxBytes ByteSize `env:"OUTBOX_MAX_BYTES" envDefault:"8MiB" help:"most bytes of app messages queued per session while the upstream is down"`

	// OutboxOverflow is close, drop-oldest or drop-newest. Default close.
	OutboxOverflow buffer.Overflow `env:"OUTBOX_OVERFLOW" envDefault:"close" help:"when the outbox is full: close (the app, with 1013), drop-oldest or drop-newest"`

	// MaxSessions caps concurrent app connections. Default 1024.
	MaxSessions int `env:"MAX_SESSIONS" envDefault:"1024" help:"most concurrent app connections"`

	// MaxMessageBytes caps one message in either direction, at most 1GiB; an
	// oversized app message closes the app with 1009. For an SSE upstream it
	// caps one event's data and one line of the stream. Default 16MiB.
	MaxMessageBytes ByteSize `env:"MAX_MESSAGE_BYTES" envDefault:"16MiB" help:"largest message in either direction, at most 1GiB (SSE: largest event data and line)"`

	// DownstreamBufferBytes caps upstream messages waiting for a slow app per
	// session, after which upstream reads pause. Default 16MiB.
	DownstreamBufferBytes ByteSize `env:"DOWNSTREAM_BUFFER_BYTES" envDefault:"16MiB" help:"bytes buffered per session for a slow app before upstream reads pause"`

	// MemoryLimit is the memory budget of what all sessions buffer towards
	// their apps together (memory.go, docs/design.md "Memory"). Default
	// unset: half the cgroup memory limit when one is visible, otherwise
	// 256MiB.
	MemoryLimit OptionalSize `env:"MEMORY_LIMIT" help:"memory budget of what all sessions buffer together; unset: half the cgroup memory limit, or 256MiB without one"`

	// MemoryShareBytes is the part of MemoryLimit guaranteed to each
	// session: TETHER_MAX_SESSIONS of them are set aside. Default 32KiB.
	MemoryShareBytes ByteSize `env:"MEMORY_SHARE_BYTES" envDefault:"32KiB" help:"bytes of TETHER_MEMORY_LIMIT guaranteed to each session (TETHER_MAX_SESSIONS shares are set aside)"`

	// DrainTimeout is the time over which app sockets are closed on
	// SIGTERM/SIGINT. Default 10s.
	DrainTimeout time.Duration `env:"DRAIN_TIMEOUT" envDefault:"10s" help:"time over which app connections are closed on SIGTERM or SIGINT"`

	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string `env:"LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error"`

	// LogFormat is json (for collectors) or console (for people). Default json.
	LogFormat string `env:"LOG_FORMAT" envDefault:"json" help:"json or console"`

	// EnvFile is a file of TETHER_*=value lines, one a line (# comments,
	// blank lines, optional surrounding quotes), read at start for service
	// managers where environment variables are awkward; a variable set in
	// the environment wins over the file. Default none (docs/desktop.md).
	EnvFile string `env:"ENV_FILE" help:"file of TETHER_*=value lines (# comments, optional quotes) read at start; a variable set in the environment wins over the file"`
}

// Error reports invalid configuration; main maps it to exit code 2.
// Err joins one error per problem, each naming its variable.
type Error struct {
	Err error
}

func (e *Error) Error() string {
	return "invalid configuration:\n  " + strings.ReplaceAll(e.Err.Error(), "\n", "\n  ")
}

func (e *Error) Unwrap() error { return e.Err }

// Problems lists the problems one by one, in the order they are reported.
func (e *Error) Problems() []error { return flattenErrors(e.Err) }

// ProblemVariable is the variable a problem of an *Error names, and false
// for an error that is not one problem.
func ProblemVariable(err error) (string, bool) {
	var p *problem
	if !errors.As(err, &p) {
		return "", false
	}
	return p.name, true
}

// problem is one invalid variable. related lists other variables the check
// read, so it can be suppressed when one of them failed to parse (its zero
// value would otherwise cause a second, misleading report).
type problem struct {
	name    string
	msg     string
	related []string
}

// Error is one line whatever the message quotes (a regexp error quotes the
// pattern raw, newlines included): the report lists one problem per line.
func (p *problem) Error() string { return p.name + ": " + lineBreaks.Replace(p.msg) }

var lineBreaks = strings.NewReplacer("\r", `\r`, "\n", `\n`)

func newProblem(name, format string, args ...any) error {
	return &problem{name: name, msg: fmt.Sprintf(format, args...)}
}

// Load parses and validates tether's variables from environ (the process
// environment as a map; nothing here reads os.Getenv). All problems are
// reported together in one *Error: parse errors, unknown TETHER_*
// variables and failed checks.
func Load(environ map[string]string) (Config, error) {
	if environ == nil {
		// env.Options falls back to os.Environ() for a nil map.
		environ = map[string]string{}
	}
	cfg, err := env.ParseAsWithOptions[Config](env.Options{
		Prefix:      Prefix,
		Environment: environ,
		FuncMap:     map[reflect.Type]env.ParserFunc{reflect.TypeFor[url.URL](): parseUpstreamURL},
	})
	cfg.resolveCodeLists(environ)
	cfg.UpstreamProxy.env = proxyEnvironment(environ)
	errs := parseProblems(err, environ)
	failed := map[string]bool{}
	for _, e := range errs {
		var p *problem
		if errors.As(e, &p) {
			failed[p.name] = true
		}
	}
	cfg.presetDefaults(environ)
	errs = append(errs, unknownVariables(environ)...)
	for _, e := range flattenErrors(cfg.Validate()) {
		if !involvesAny(e, failed) {
			errs = append(errs, e)
		}
	}
	if len(errs) == 0 {
		return cfg, nil
	}
	sortProblems(errs)
	return Config{}, &Error{Err: errors.Join(errs...)}
}

// involvesAny reports whether a validation problem read a variable that
// already failed to parse.
func involvesAny(err error, failed map[string]bool) bool {
	var p *problem
	if !errors.As(err, &p) {
		return false
	}
	return failed[p.name] || slices.ContainsFunc(p.related, func(n string) bool { return failed[n] })
}

func flattenErrors(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flattenErrors(e)...)
	}
	return out
}

// sortProblems orders problems as the variables appear in --help, unknown
// variables last, so the report reads like the documentation.
func sortProblems(errs []error) {
	order := map[string]int{}
	for i, v := range Variables() {
		order[v.Name] = i
	}
	rank := func(e error) int {
		var p *problem
		if errors.As(e, &p) {
			if i, ok := order[p.name]; ok {
				return i
			}
		}
		return len(order)
	}
	slices.SortStableFunc(errs, func(a, b error) int { return rank(a) - rank(b) })
}

// parseProblems turns env's aggregate error into one problem per variable.
func parseProblems(err error, environ map[string]string) []error {
	if err == nil {
		return nil
	}
	var out []error
	for _, e := range flattenErrors(err) {
		out = append(out, parseProblem(e, environ))
	}
	return out
}

func parseProblem(err error, environ map[string]string) error {
	var (
		perr     env.ParseError
		notSet   env.VarIsNotSetError
		emptyVar env.EmptyVarError
	)
	switch {
	case errors.As(err, &notSet):
		return newProblem(notSet.Key, "required, not set")
	case errors.As(err, &emptyVar):
		return newProblem(emptyVar.Key, "required, must not be empty")
	case errors.As(err, &perr):
		name := fieldVariable(perr.Name)
		return newProblem(name, "%s", describeParseError(perr, environ[name]))
	default:
		// env reports programming errors (unsupported tag, no parser) this way;
		// keep them visible rather than guess a variable.
		return err
	}
}

// describeParseError words a parse failure for an operator. Values are echoed
// only for types whose values are not secret: durations and integers.
func describeParseError(perr env.ParseError, raw string) string {
	switch {
	case perr.Type == reflect.TypeFor[time.Duration]():
		return fmt.Sprintf("invalid duration %q: use a Go duration such as 500ms, 10s or 1m", raw)
	case perr.Type == reflect.TypeFor[int]():
		return fmt.Sprintf("invalid integer %q", raw)
	}
	var pv env.ParseValueError
	if errors.As(perr.Err, &pv) {
		return pv.Err.Error()
	}
	return perr.Err.Error()
}

// fieldVariable maps a Config field name to its variable name.
func fieldVariable(field string) string {
	for _, v := range Variables() {
		if v.Field == field {
			return v.Name
		}
	}
	return field
}

// serviceLinkSuffix matches the variables Kubernetes injects for every
// Service in the namespace (enableServiceLinks), after the service name: a
// Service named "tether" or "tether-admin" yields TETHER_PORT,
// TETHER_SERVICE_HOST, TETHER_ADMIN_PORT_9090_TCP_ADDR and the like.
var serviceLinkSuffix = regexp.MustCompile(`^(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[0-9]+_(TCP|UDP|SCTP)(_(PORT|PROTO|ADDR))?)?)$`)

// isServiceLink reports whether name is a Kubernetes service link. Those are
// not typos and must not stop the pod. A Service's links always include its
// _SERVICE_HOST and _SERVICE_PORT, which tells them from a mistyped
// TETHER_LISTEN_PORT. Every split of the name into service and suffix is
// tried, since service names contain underscores too.
func isServiceLink(name string, environ map[string]string) bool {
	rest, ok := strings.CutPrefix(name, Prefix)
	for i := 0; ok; {
		service := Prefix + rest[:i]
		_, host := environ[service+"SERVICE_HOST"]
		_, port := environ[service+"SERVICE_PORT"]
		if host && port && serviceLinkSuffix.MatchString(rest[i:]) {
			return true
		}
		j := strings.IndexByte(rest[i:], '_')
		i, ok = i+j+1, j >= 0
	}
	return false
}

// unknownVariables reports TETHER_* variables that no field reads: a typo such
// as TETHER_UPSTREM_URL would otherwise be ignored silently.
func unknownVariables(environ map[string]string) []error {
	known := map[string]bool{}
	var names []string
	for _, v := range Variables() {
		known[v.Name] = true
		names = append(names, v.Name)
	}
	var out []error
	for _, name := range slices.Sorted(maps.Keys(environ)) {
		if !strings.HasPrefix(name, Prefix) || known[name] || isServiceLink(name, environ) {
			continue
		}
		msg := "unknown variable"
		if guess := closestName(name, names); guess != "" {
			msg += " (did you mean " + guess + "?)"
		}
		out = append(out, newProblem(name, "%s", msg))
	}
	return out
}

// closestName returns the known name within a small edit distance of name, or "".
func closestName(name string, known []string) string {
	best, bestDist := "", 4
	for _, k := range known {
		if d := editDistance(name, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between two ASCII strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Validate checks values and combinations that parsing alone cannot. Each
// problem names its variable; all are joined into one error.
func (c Config) Validate() error {
	return errors.Join(
		c.validateUpstreamURL(),
		c.validateUpstreamKind(),
		c.validateSSESettings(),
		c.validateListen(),
		c.validateHeaders(),
		c.validateTokenFile(),
		c.validateTLSFiles(),
		c.validateProxy(),
		c.validateTimeouts(),
		c.validateBackoff(),
		c.validateAttempts(),
		c.validateCodes(),
		c.validateHeartbeat(),
		c.validateRestoreRules(),
		c.validateProtocol(),
		c.validateProtocolRules(),
		c.validateSequences(),
		c.validateOutbox(),
		c.validateLimits(),
		c.validateMemory(),
		c.validateLogging(),
	)
}

func (c Config) validateUpstreamURL() error {
	if c.UpstreamURL == nil {
		return newProblem("TETHER_UPSTREAM_URL", "required, not set")
	}
	if err := checkUpstreamURL(c.UpstreamURL); err != nil {
		return newProblem("TETHER_UPSTREAM_URL", "%v", err)
	}
	return nil
}

// validateUpstreamKind refuses a TETHER_UPSTREAM_KIND that the URL's scheme
// contradicts: tether cannot speak SSE to ws:// nor WebSocket to http://.
func (c Config) validateUpstreamKind() error {
	if !c.UpstreamKind.set || c.UpstreamURL == nil {
		return nil
	}
	if inferred := kindOfScheme(c.UpstreamURL.Scheme); c.UpstreamKind.kind != inferred {
		return &problem{
			name: "TETHER_UPSTREAM_KIND",
			msg: fmt.Sprintf("%s contradicts TETHER_UPSTREAM_URL, whose scheme %q means %s; use %s for %s, or unset TETHER_UPSTREAM_KIND",
				c.UpstreamKind.kind, c.UpstreamURL.Scheme, inferred, schemesOf(c.UpstreamKind.kind), c.UpstreamKind.kind),
			related: []string{"TETHER_UPSTREAM_URL"},
		}
	}
	return nil
}

// sseRefused are the variables that make no sense with an SSE upstream, which
// takes no messages, and what each would have done.
var sseRefused = []struct{ name, does string }{
	{"TETHER_AUTH_MATCH", "re-sends the app's login"},
	{"TETHER_AUTH_OK_MATCH", "waits for the reply to a re-sent login"},
	{"TETHER_SUBSCRIBE_MATCH", "replays the app's subscriptions"},
	{"TETHER_UNSUBSCRIBE_MATCH", "replays the app's unsubscriptions"},
	{"TETHER_SUBSCRIPTION_KEY", "compacts replayed subscriptions"},
	{"TETHER_REPLY_ID_PATH", "hides replies to replayed requests"},
	{"TETHER_RESUME_MESSAGE", "sends a resume request (an SSE upstream resumes with the Last-Event-ID header)"},
	{"TETHER_HEARTBEAT_MESSAGE", "probes with a message (an SSE upstream is dead after TETHER_PING_INTERVAL + TETHER_PING_TIMEOUT of silence)"},
	{"TETHER_ACK_ID_PATH", "re-sends unacknowledged app messages"},
	{"TETHER_ACK_MATCH", "re-sends unacknowledged app messages"},
}

// validateSSESettings refuses, one message each, settings that send to the
// upstream when the upstream is an event stream: they could never act, and a
// setting that silently does nothing costs an operator hours.
func (c Config) validateSSESettings() error {
	if c.Kind() != upstream.KindSSE || c.validateUpstreamKind() != nil {
		return nil // not SSE, or not known to be: the contradiction is reported
	}
	set := map[string]bool{
		"TETHER_AUTH_MATCH":        c.AuthMatch != nil,
		"TETHER_AUTH_OK_MATCH":     c.AuthOKMatch != nil,
		"TETHER_SUBSCRIBE_MATCH":   c.SubscribeMatch != nil,
		"TETHER_UNSUBSCRIBE_MATCH": c.UnsubscribeMatch != nil,
		"TETHER_SUBSCRIPTION_KEY":  c.SubscriptionKey.String() != "",
		"TETHER_REPLY_ID_PATH":     c.ReplyIDPath.String() != "",
		"TETHER_RESUME_MESSAGE":    c.ResumeMessage.IsSet(),
		"TETHER_HEARTBEAT_MESSAGE": c.HeartbeatMessage != "",
		"TETHER_ACK_ID_PATH":       c.AckIDPath.String() != "",
		"TETHER_ACK_MATCH":         c.AckMatch != nil,
	}
	var errs []error
	for _, r := range sseRefused {
		if set[r.name] {
			errs = append(errs, &problem{
				name:    r.name,
				msg:     "an SSE upstream takes no messages, so this setting (it " + r.does + ") cannot apply; unset it",
				related: []string{"TETHER_UPSTREAM_URL", "TETHER_UPSTREAM_KIND"},
			})
		}
	}
	return errors.Join(errs...)
}

// Kind is the upstream's protocol: TETHER_UPSTREAM_KIND when set, otherwise
// what TETHER_UPSTREAM_URL's scheme says.
func (c Config) Kind() upstream.Kind {
	if c.UpstreamKind.set || c.UpstreamURL == nil {
		return c.UpstreamKind.kind
	}
	return kindOfScheme(c.UpstreamURL.Scheme)
}

// kindOfScheme infers the protocol from a URL scheme: http and https are SSE,
// anything else (ws, wss) WebSocket.
func kindOfScheme(scheme string) upstream.Kind {
	if scheme == "http" || scheme == "https" {
		return upstream.KindSSE
	}
	return upstream.KindWebSocket
}

func schemesOf(k upstream.Kind) string {
	if k == upstream.KindSSE {
		return "an http:// or https:// URL"
	}
	return "a ws:// or wss:// URL"
}

// kindSetting is TETHER_UPSTREAM_KIND: an explicit upstream.Kind, or unset
// (set false), in which case the URL's scheme decides.
type kindSetting struct {
	kind upstream.Kind
	set  bool
}

// UnmarshalText parses websocket or sse; blank means unset.
func (k *kindSetting) UnmarshalText(text []byte) error {
	if strings.TrimSpace(string(text)) == "" {
		*k = kindSetting{}
		return nil
	}
	v, err := upstream.ParseKind(string(text))
	if err != nil {
		return err
	}
	*k = kindSetting{kind: v, set: true}
	return nil
}

// validateListen checks TETHER_LISTEN against the system tether was built
// for (unix sockets, their path length).
func (c Config) validateListen() error {
	return c.Listen.validateFor(runtime.GOOS)
}

func (c Config) validateHeaders() error {
	if c.UpstreamTokenFile != "" && c.UpstreamHeaders.header.Get("Authorization") != "" {
		return &problem{
			name:    "TETHER_UPSTREAM_HEADERS",
			msg:     "sets Authorization, which TETHER_UPSTREAM_TOKEN_FILE also sets; keep one",
			related: []string{"TETHER_UPSTREAM_TOKEN_FILE"},
		}
	}
	return c.validateUserinfo()
}

// validateUserinfo refuses credentials in the URL's userinfo, which every
// dial sends as Basic auth (WebSocket and SSE alike), together with another
// Authorization: one of them would be dropped without a word.
func (c Config) validateUserinfo() error {
	if c.UpstreamURL == nil || c.UpstreamURL.User == nil {
		return nil
	}
	other := ""
	switch {
	case c.UpstreamTokenFile != "":
		other = "TETHER_UPSTREAM_TOKEN_FILE"
	case c.UpstreamHeaders.header.Get("Authorization") != "":
		other = "TETHER_UPSTREAM_HEADERS"
	default:
		return nil
	}
	return &problem{
		name: "TETHER_UPSTREAM_URL",
		msg: fmt.Sprintf("has userinfo, which tether sends as Basic auth, and %s sets Authorization too; "+
			"keep one (drop user:password@ from the URL, or %s)", other, other),
		related: []string{other},
	}
}

func (c Config) validateTokenFile() error {
	if c.UpstreamTokenFile == "" {
		return nil
	}
	b, err := os.ReadFile(c.UpstreamTokenFile)
	if err != nil {
		return newProblem("TETHER_UPSTREAM_TOKEN_FILE", "cannot read: %v", err)
	}
	if strings.TrimSpace(string(b)) == "" {
		return newProblem("TETHER_UPSTREAM_TOKEN_FILE", "file %q is empty", c.UpstreamTokenFile)
	}
	return nil
}

func (c Config) validateTLSFiles() error {
	var errs []error
	if c.UpstreamCAFile != "" {
		if _, err := loadCAPool(c.UpstreamCAFile); err != nil {
			errs = append(errs, newProblem("TETHER_UPSTREAM_CA_FILE", "%v", err))
		}
	}
	switch {
	case c.UpstreamCertFile != "" && c.UpstreamKeyFile == "":
		errs = append(errs, newProblem("TETHER_UPSTREAM_KEY_FILE", "required when TETHER_UPSTREAM_CERT_FILE is set"))
	case c.UpstreamCertFile == "" && c.UpstreamKeyFile != "":
		errs = append(errs, newProblem("TETHER_UPSTREAM_CERT_FILE", "required when TETHER_UPSTREAM_KEY_FILE is set"))
	case c.UpstreamCertFile != "":
		if _, err := tls.LoadX509KeyPair(c.UpstreamCertFile, c.UpstreamKeyFile); err != nil {
			errs = append(errs, &problem{
				name:    "TETHER_UPSTREAM_CERT_FILE",
				msg:     fmt.Sprintf("cannot load key pair: %v", err),
				related: []string{"TETHER_UPSTREAM_KEY_FILE"},
			})
		}
	}
	return errors.Join(errs...)
}

func (c Config) validateTimeouts() error {
	return errors.Join(
		durationAbove("TETHER_DIAL_TIMEOUT", c.DialTimeout),
		durationAtLeast0("TETHER_ACCEPT_WAIT", c.AcceptWait),
		durationAbove("TETHER_STABLE_AFTER", c.StableAfter),
		durationAtLeast0("TETHER_RESTART_FLOOR", c.RestartFloor),
		durationAtLeast0("TETHER_TRY_AGAIN_FLOOR", c.TryAgainFloor),
		durationAtLeast0("TETHER_DRAIN_TIMEOUT", c.DrainTimeout),
		durationAtLeast0("TETHER_SSE_LINGER", c.SSELinger),
	)
}

// validateBackoff checks each variable on its own, then their order only
// when both are valid: two mistakes give two lines.
func (c Config) validateBackoff() error {
	base := durationAbove("TETHER_BACKOFF_BASE", c.BackoffBase)
	capErr := durationAbove("TETHER_BACKOFF_CAP", c.BackoffCap)
	if base == nil && capErr == nil && c.BackoffCap < c.BackoffBase {
		capErr = &problem{
			name: "TETHER_BACKOFF_CAP",
			msg: fmt.Sprintf("must be ≥ TETHER_BACKOFF_BASE (%s), got %q",
				c.BackoffBase, c.BackoffCap.String()),
			related: []string{"TETHER_BACKOFF_BASE"},
		}
	}
	return errors.Join(base, capErr)
}

func (c Config) validateAttempts() error {
	var errs []error
	if c.MaxAttempts < 0 {
		errs = append(errs, newProblem("TETHER_MAX_ATTEMPTS", "must be ≥ 0 (0 retries forever), got %d", c.MaxAttempts))
	}
	if c.AuthFailuresMax < 1 {
		errs = append(errs, newProblem("TETHER_AUTH_FAILURES_MAX", "must be ≥ 1, got %d", c.AuthFailuresMax))
	}
	return errors.Join(errs...)
}

// resolveCodeLists gives the two close-code lists what parsing alone cannot
// (docs/configuration.md). Set empty, a list means no codes: env would take
// its default, as an empty value means for every other variable, and an
// operator who writes TETHER_REAUTH_CODES= means none. A list that is set
// wins over the other list's default for the codes they share:
// TETHER_PERMANENT_CODES=4000-4999 takes 4001 and 4003 from the reauth
// default instead of refusing to start. Two lists that are both set and
// share a code are left to validateCodes.
func (c *Config) resolveCodeLists(environ map[string]string) {
	permanent, permanentSet := environ["TETHER_PERMANENT_CODES"]
	reauth, reauthSet := environ["TETHER_REAUTH_CODES"]
	if permanentSet && strings.TrimSpace(permanent) == "" {
		c.PermanentCodes = upstream.CodeSet{}
	}
	if reauthSet && strings.TrimSpace(reauth) == "" {
		c.ReauthCodes = upstream.CodeSet{}
	}
	switch {
	case permanentSet && !reauthSet:
		c.ReauthCodes = c.ReauthCodes.Without(c.PermanentCodes)
	case reauthSet && !permanentSet:
		c.PermanentCodes = c.PermanentCodes.Without(c.ReauthCodes)
	}
}

// validateCodes refuses a code in both lists, both set by the operator
// (resolveCodeLists settles a default's overlap): tether could not tell
// whether to give up or to re-authenticate.
func (c Config) validateCodes() error {
	for code := 1000; code <= 4999; code++ {
		if c.PermanentCodes.Contains(code) && c.ReauthCodes.Contains(code) {
			return &problem{
				name:    "TETHER_REAUTH_CODES",
				msg:     fmt.Sprintf("code %d is also in TETHER_PERMANENT_CODES", code),
				related: []string{"TETHER_PERMANENT_CODES"},
			}
		}
	}
	return nil
}

// validateHeartbeat checks each variable on its own (a negative timeout is
// wrong with the heartbeat off too), then that a heartbeat has a timeout.
func (c Config) validateHeartbeat() error {
	interval := durationAtLeast0("TETHER_PING_INTERVAL", c.PingInterval)
	timeout := durationAtLeast0("TETHER_PING_TIMEOUT", c.PingTimeout)
	if c.PingInterval > 0 && c.PingTimeout <= 0 {
		timeout = &problem{
			name:    "TETHER_PING_TIMEOUT",
			msg:     fmt.Sprintf("must be > 0 while TETHER_PING_INTERVAL is set, got %q", c.PingTimeout.String()),
			related: []string{"TETHER_PING_INTERVAL"},
		}
	}
	return errors.Join(interval, timeout)
}

// validateRestoreRules refuses rules that could never take effect without
// another one: a setting that silently does nothing costs an operator hours.
func (c Config) validateRestoreRules() error {
	if c.Kind() == upstream.KindSSE {
		return nil // every one of them is refused for SSE (validateSSESettings)
	}
	set := map[string]bool{
		"TETHER_AUTH_MATCH":        c.AuthMatch != nil,
		"TETHER_AUTH_OK_MATCH":     c.AuthOKMatch != nil,
		"TETHER_SUBSCRIBE_MATCH":   c.SubscribeMatch != nil,
		"TETHER_UNSUBSCRIBE_MATCH": c.UnsubscribeMatch != nil,
		"TETHER_SUBSCRIPTION_KEY":  c.SubscriptionKey.String() != "",
		"TETHER_REPLY_ID_PATH":     c.ReplyIDPath.String() != "",
		"TETHER_ACK_ID_PATH":       c.AckIDPath.String() != "",
		"TETHER_ACK_MATCH":         c.AckMatch != nil,
	}
	needs := func(name string, others ...string) error {
		if !set[name] {
			return nil
		}
		for _, o := range others {
			if set[o] {
				return nil
			}
		}
		return &problem{name: name, msg: "needs " + strings.Join(others, " or "), related: others}
	}
	return errors.Join(
		needs("TETHER_AUTH_OK_MATCH", "TETHER_AUTH_MATCH"),
		needs("TETHER_UNSUBSCRIBE_MATCH", "TETHER_SUBSCRIBE_MATCH"),
		needs("TETHER_SUBSCRIPTION_KEY", "TETHER_SUBSCRIBE_MATCH"),
		needs("TETHER_REPLY_ID_PATH", "TETHER_AUTH_MATCH", "TETHER_SUBSCRIBE_MATCH"),
		needs("TETHER_ACK_ID_PATH", "TETHER_ACK_MATCH"),
		needs("TETHER_ACK_MATCH", "TETHER_ACK_ID_PATH"),
	)
}

// validateSequences refuses sequence settings that could never take effect
// and those that contradict each other, naming the variable to add or drop.
func (c Config) validateSequences() error {
	// With an SSE upstream validateSSESettings refuses a resume message, so
	// no advice may lean on one.
	resume := c.ResumeMessage.IsSet() && c.Kind() != upstream.KindSSE
	set := map[string]bool{
		"TETHER_SESSION_MATCH":   c.SessionMatch != nil,
		"TETHER_SESSION_PATH":    c.SessionPath.String() != "",
		"TETHER_RESUME_MESSAGE":  resume,
		"TETHER_SEQ_PATH":        c.SeqPath.String() != "",
		"TETHER_STREAM_PATH":     c.StreamPath.String() != "",
		"TETHER_RESYNC_MATCH":    c.ResyncMatch != nil,
		"TETHER_RESYNC_SEQ_PATH": c.ResyncSeqPath.String() != "",
		"TETHER_EPOCH_PATH":      c.EpochPath.String() != "",
		"TETHER_SEQ_FIRST_PATH":  c.SeqFirstPath.String() != "",
		"TETHER_SEQ_PREV_PATH":   c.SeqPrevPath.String() != "",
		"TETHER_GAPFILL_URL":     c.GapFillURL.IsSet(),
		"TETHER_RESYNC_URL":      c.ResyncURL.IsSet(),
		"TETHER_GAP_NOTICE":      c.GapNotice.IsSet(),
	}
	needs := func(name string, others ...string) error {
		if !set[name] || slices.ContainsFunc(others, func(o string) bool { return set[o] }) {
			return nil
		}
		return &problem{name: name, msg: "needs " + strings.Join(others, " or "), related: others}
	}
	return errors.Join(
		needs("TETHER_SESSION_MATCH", "TETHER_SESSION_PATH"),
		needs("TETHER_SESSION_PATH", "TETHER_SESSION_MATCH"),
		needs("TETHER_SESSION_MATCH", c.sessionUsers()...),
		needs("TETHER_RESUME_MESSAGE", "TETHER_SEQ_PATH"),
		needs("TETHER_STREAM_PATH", "TETHER_SEQ_PATH"),
		needs("TETHER_RESYNC_MATCH", "TETHER_SEQ_PATH"),
		needs("TETHER_RESYNC_MATCH", "TETHER_RESYNC_SEQ_PATH"),
		needs("TETHER_RESYNC_SEQ_PATH", "TETHER_RESYNC_MATCH", "TETHER_RESYNC_URL"),
		needs("TETHER_RESYNC_URL", "TETHER_SEQ_PATH"),
		needs("TETHER_RESYNC_URL", "TETHER_RESYNC_SEQ_PATH"),
		needs("TETHER_GAPFILL_URL", "TETHER_SEQ_PATH"),
		needs("TETHER_EPOCH_PATH", "TETHER_SEQ_PATH"),
		needs("TETHER_GAP_NOTICE", "TETHER_SEQ_PATH"),
		c.validateGapPolicy(),
		c.validateSeqModel(),
		durationAbove("TETHER_GAP_TIMEOUT", c.GapTimeout),
		sizeAbove0("TETHER_HOLD_MAX_BYTES", c.HoldMaxBytes),
	)
}

// sessionUsers are the variables whose templates use the captured .Session:
// no resume message for an SSE upstream, which resumes with Last-Event-ID.
func (c Config) sessionUsers() []string {
	if c.Kind() == upstream.KindSSE {
		return []string{"TETHER_GAPFILL_URL", "TETHER_RESYNC_URL"}
	}
	return []string{"TETHER_RESUME_MESSAGE", "TETHER_GAPFILL_URL", "TETHER_RESYNC_URL"}
}

// validateSeqModel ties each model to the path it reads, both ways: range
// reads TETHER_SEQ_FIRST_PATH and chain TETHER_SEQ_PREV_PATH, which no
// other model reads; any model but the default needs TETHER_SEQ_PATH.
func (c Config) validateSeqModel() error {
	model := func(name string, want buffer.Model, set bool) error {
		switch {
		case set && c.SeqModel != want:
			return &problem{name: name, msg: fmt.Sprintf("only read with TETHER_SEQ_MODEL=%s, got %q", want, c.SeqModel),
				related: []string{"TETHER_SEQ_MODEL"}}
		case !set && c.SeqModel == want:
			return &problem{name: name, msg: "required when TETHER_SEQ_MODEL=" + want.String(), related: []string{"TETHER_SEQ_MODEL"}}
		}
		return nil
	}
	var noSeq, scope, snapshot error
	if c.SeqModel != buffer.ModelNext && c.SeqPath.String() == "" {
		noSeq = &problem{name: "TETHER_SEQ_MODEL", msg: "needs TETHER_SEQ_PATH", related: []string{"TETHER_SEQ_PATH"}}
	}
	if c.SeqModel == buffer.ModelIncreasing && c.ResyncURL.IsSet() {
		// No gap is ever seen, so no snapshot would ever be fetched.
		snapshot = &problem{name: "TETHER_RESYNC_URL", msg: "never fetched with TETHER_SEQ_MODEL=increasing, which sees no gaps",
			related: []string{"TETHER_SEQ_MODEL"}}
	}
	if c.SeqScope == sequence.ScopeConnection {
		scope = c.validateConnectionScope()
	}
	return errors.Join(noSeq, scope, snapshot,
		model("TETHER_SEQ_FIRST_PATH", buffer.ModelRange, c.SeqFirstPath.String() != ""),
		model("TETHER_SEQ_PREV_PATH", buffer.ModelChain, c.SeqPrevPath.String() != ""))
}

// validateConnectionScope refuses what TETHER_SEQ_SCOPE=connection makes
// meaningless: numbers of an earlier connection cannot be resumed or
// fetched, since the next connection numbers afresh.
func (c Config) validateConnectionScope() error {
	var errs []error
	if c.SeqPath.String() == "" {
		errs = append(errs, &problem{name: "TETHER_SEQ_SCOPE", msg: "needs TETHER_SEQ_PATH", related: []string{"TETHER_SEQ_PATH"}})
	}
	for name, set := range map[string]bool{"TETHER_RESUME_MESSAGE": c.ResumeMessage.IsSet(), "TETHER_GAPFILL_URL": c.GapFillURL.IsSet()} {
		if set {
			errs = append(errs, &problem{name: name, msg: "cannot ask for numbers of an earlier connection under TETHER_SEQ_SCOPE=connection",
				related: []string{"TETHER_SEQ_SCOPE"}})
		}
	}
	if c.ResyncURL.IsSet() {
		// A snapshot's number counts across connections; under this scope
		// the stream's numbers start over on each, so neither can be
		// compared with the other.
		errs = append(errs, &problem{name: "TETHER_RESYNC_URL", msg: "a snapshot's number cannot continue numbers that restart on each connection (TETHER_SEQ_SCOPE=connection)",
			related: []string{"TETHER_SEQ_SCOPE"}})
	}
	return errors.Join(errs...)
}

// validateGapPolicy ties TETHER_GAP_NOTICE to the notify policy, both ways:
// notify without a notice has nothing to send, and a notice under another
// policy would never be sent.
func (c Config) validateGapPolicy() error {
	switch {
	case c.GapPolicy == proxy.GapNotify && !c.GapNotice.IsSet():
		return &problem{name: "TETHER_GAP_NOTICE", msg: "required when TETHER_GAP_POLICY=notify",
			related: []string{"TETHER_GAP_POLICY"}}
	case c.GapPolicy != proxy.GapNotify && c.GapNotice.IsSet():
		return &problem{name: "TETHER_GAP_NOTICE", msg: fmt.Sprintf("only sent with TETHER_GAP_POLICY=notify, got %q", c.GapPolicy),
			related: []string{"TETHER_GAP_POLICY"}}
	}
	return nil
}

func (c Config) validateOutbox() error {
	var errs []error
	if c.OutboxMaxMessages <= 0 {
		errs = append(errs, newProblem("TETHER_OUTBOX_MAX_MESSAGES", "must be > 0, got %d", c.OutboxMaxMessages))
	}
	errs = append(errs, sizeAbove0("TETHER_OUTBOX_MAX_BYTES", c.OutboxMaxBytes))
	return errors.Join(errs...)
}

func (c Config) validateLimits() error {
	var errs []error
	if c.MaxSessions <= 0 {
		errs = append(errs, newProblem("TETHER_MAX_SESSIONS", "must be > 0, got %d", c.MaxSessions))
	}
	if c.MaxMessageBytes > maxMessageLimit {
		errs = append(errs, newProblem("TETHER_MAX_MESSAGE_BYTES", "must be ≤ %s, got %q", maxMessageLimit, c.MaxMessageBytes.String()))
	}
	errs = append(errs,
		sizeAbove0("TETHER_MAX_MESSAGE_BYTES", c.MaxMessageBytes),
		sizeAbove0("TETHER_DOWNSTREAM_BUFFER_BYTES", c.DownstreamBufferBytes),
	)
	return errors.Join(errs...)
}

func (c Config) validateLogging() error {
	var errs []error
	if _, err := ParseLogLevel(c.LogLevel); err != nil {
		errs = append(errs, newProblem("TETHER_LOG_LEVEL", "%v", err))
	}
	if _, err := NewLogEncoder(c.LogFormat); err != nil {
		errs = append(errs, newProblem("TETHER_LOG_FORMAT", "%v", err))
	}
	return errors.Join(errs...)
}

func durationAbove(name string, d time.Duration) error {
	if d <= 0 {
		return newProblem(name, "must be > 0, got %q", d.String())
	}
	return nil
}

func durationAtLeast0(name string, d time.Duration) error {
	if d < 0 {
		return newProblem(name, "must be ≥ 0, got %q", d.String())
	}
	return nil
}

func sizeAbove0(name string, s ByteSize) error {
	if s <= 0 {
		return newProblem(name, "must be > 0, got %q", s.String())
	}
	return nil
}

// parseUpstreamURL is the env parser for TETHER_UPSTREAM_URL. Its errors never
// contain the URL: it may carry a password or a token in its query.
func parseUpstreamURL(v string) (any, error) {
	u, err := url.Parse(strings.TrimSpace(v))
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("invalid URL: %w", err)
	}
	if err := checkUpstreamURL(u); err != nil {
		return nil, err
	}
	return *u, nil
}

func checkUpstreamURL(u *url.URL) error {
	switch {
	case u.Scheme != "ws" && u.Scheme != "wss" && u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("scheme must be ws or wss (WebSocket), http or https (SSE), got %q", u.Scheme)
	case u.Host == "":
		return errors.New("missing host")
	case u.Fragment != "":
		// RFC 6455 §3: a WebSocket URI must not contain a fragment; an HTTP
		// request never sends one, so it could only mislead.
		return errors.New("must not contain a #fragment")
	}
	return nil
}

// AdminAddr is the admin server's host:port; "" means disabled ("off").
type AdminAddr string

// UnmarshalText accepts host:port or "off".
func (a *AdminAddr) UnmarshalText(text []byte) error {
	v := strings.TrimSpace(string(text))
	if v == "off" {
		*a = ""
		return nil
	}
	if err := checkHostPort(v); err != nil {
		return fmt.Errorf("%w (or off)", err)
	}
	*a = AdminAddr(v)
	return nil
}

// headerList holds TETHER_UPSTREAM_HEADERS, parsed.
type headerList struct {
	header http.Header
}

// UnmarshalText parses "Name: value" entries. Entries are separated by
// newlines; on a single line, a comma followed by "Name:" starts the next
// entry, so values that contain commas ("Accept: a, b") survive. A comma that
// ends a line and blank entries are ignored. Errors name the entry and header
// name but never the value, which is often a secret.
func (h *headerList) UnmarshalText(text []byte) error {
	out := http.Header{}
	for i, entry := range splitHeaderEntries(string(text)) {
		name, value, err := parseHeaderEntry(entry)
		if err != nil {
			return fmt.Errorf("entry %d: %w", i+1, err)
		}
		out.Add(name, value)
	}
	h.header = out
	return nil
}

// headerEntryStart finds ", Name:" where a new entry begins on one line.
var headerEntryStart = regexp.MustCompile(`,\s*[!#$%&'*+\-.^_` + "`" + `|~0-9A-Za-z]+\s*:`)

func splitHeaderEntries(s string) []string {
	var entries []string
	for line := range strings.Lines(s) {
		// A line may end with the comma of a one-line list split over lines.
		rest := strings.TrimSuffix(strings.TrimSpace(line), ",")
		for {
			loc := headerEntryStart.FindStringIndex(rest)
			if loc == nil {
				break
			}
			entries = append(entries, rest[:loc[0]])
			rest = rest[loc[0]+1:]
		}
		entries = append(entries, rest)
	}
	return slices.DeleteFunc(entries, func(e string) bool { return strings.TrimSpace(e) == "" })
}

func parseHeaderEntry(entry string) (string, string, error) {
	name, value, ok := strings.Cut(strings.TrimSpace(entry), ":")
	if !ok {
		return "", "", errors.New(`missing ":" (use Name: value)`)
	}
	name = strings.TrimSpace(name)
	if !isHTTPToken(name) {
		return "", "", fmt.Errorf("invalid header name %q", name)
	}
	canonical := http.CanonicalHeaderKey(name)
	if isHandshakeHeader(canonical) {
		return "", "", fmt.Errorf("header %q is set by tether's WebSocket handshake", canonical)
	}
	value = strings.TrimSpace(value)
	if strings.ContainsFunc(value, func(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f }) {
		return "", "", fmt.Errorf("header %q: value contains a control character", canonical)
	}
	return canonical, value, nil
}

// isHTTPToken reports whether s is an RFC 9110 §5.6.2 token.
func isHTTPToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r > 0x7e || !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' ||
			strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return true
}

func isHandshakeHeader(canonical string) bool {
	switch canonical {
	case "Host", "Connection", "Upgrade":
		return true
	}
	return strings.HasPrefix(canonical, "Sec-Websocket-")
}

// Header returns a copy of the static upstream headers (never nil).
func (c Config) Header() http.Header {
	if c.UpstreamHeaders.header == nil {
		return http.Header{}
	}
	return c.UpstreamHeaders.header.Clone()
}

// TLSConfig returns the upstream TLS settings: nil for a ws:// or http://
// upstream with no CA or client certificate configured; otherwise TLS 1.2 or
// later, RootCAs from TETHER_UPSTREAM_CA_FILE (system roots when unset) and
// the client key pair. Files are read again on each call.
func (c Config) TLSConfig() (*tls.Config, error) {
	secure := c.UpstreamURL != nil && (c.UpstreamURL.Scheme == "wss" || c.UpstreamURL.Scheme == "https")
	if !secure && c.UpstreamCAFile == "" && c.UpstreamCertFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.UpstreamCAFile != "" {
		pool, err := loadCAPool(c.UpstreamCAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if c.UpstreamCertFile != "" {
		pair, err := tls.LoadX509KeyPair(c.UpstreamCertFile, c.UpstreamKeyFile)
		if err != nil {
			return nil, fmt.Errorf("load client key pair: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

func loadCAPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate found in %q", file)
	}
	return pool, nil
}

// RedactedUpstreamURL is TETHER_UPSTREAM_URL fit for logs.
func (c Config) RedactedUpstreamURL() string {
	return redactURL(c.UpstreamURL)
}

// The redaction rule (docs/security.md): a query parameter's value is
// replaced in logs when its name, lower-cased, contains one of secretParts
// or has one of secretWords as a word (between characters other than
// letters and digits: "sig", "x-sig", "sig_v2"). It errs on the side of hiding: a name such as
// "monkey" or "author" is redacted too, which costs a log reader little,
// while a credential in clear in a log collector is a leak. The parts cover
// the spellings services use (api-key, apiKey, X-API-Key, private_key,
// passwd, pwd, X-Amz-Credential, PHPSESSID, Authorization, Cookie, ...);
// the words are too short to look for inside other names.
var (
	secretParts = []string{
		"token", "key", "secret", "pass", "pwd", "auth", "credential", "jwt",
		"signature", "sess", "cookie", "bearer", "hmac", "ticket",
	}
	secretWords = []string{"sig", "sid", "otp"}
)

const redacted = "REDACTED"

// redactURL hides credentials in u: the userinfo password (or a bare
// username, which is how many services pass a token, https://TOKEN@host) and
// the values of token-like query parameters. The query keeps its order.
func redactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	r := *u
	if r.User != nil {
		if _, hasPassword := r.User.Password(); hasPassword {
			r.User = url.UserPassword(r.User.Username(), redacted)
		} else {
			r.User = url.User(redacted)
		}
	}
	r.RawQuery = redactQuery(u.RawQuery)
	return r.String()
}

func redactQuery(raw string) string {
	if raw == "" {
		return ""
	}
	parts := strings.Split(raw, "&")
	for i, part := range parts {
		rawKey, _, _ := strings.Cut(part, "=")
		key, err := url.QueryUnescape(rawKey)
		if err != nil {
			key = rawKey
		}
		if isSecretName(key) {
			parts[i] = rawKey + "=" + redacted
		}
	}
	return strings.Join(parts, "&")
}

// isSecretName applies the redaction rule to a query parameter's name.
func isSecretName(name string) bool {
	n := strings.ToLower(name)
	if slices.ContainsFunc(secretParts, func(part string) bool { return strings.Contains(n, part) }) {
		return true
	}
	words := strings.FieldsFunc(n, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	return slices.ContainsFunc(words, func(w string) bool { return slices.Contains(secretWords, w) })
}
