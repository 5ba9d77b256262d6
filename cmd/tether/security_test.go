package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"

	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// The variable reaches the listener: a page whose origin is listed connects,
// any other page is refused with 403, and "*" is warned about at start.
func TestAllowedOriginsServed(t *testing.T) {
	up := newTestUpstream(t, upstreamtest.Options{})
	r := startProxy(t, map[string]string{
		"TETHER_UPSTREAM_URL":    up.URL(),
		"TETHER_ALLOWED_ORIGINS": "http://localhost:3000",
	})
	for origin, want := range map[string]int{
		"http://localhost:3000": http.StatusSwitchingProtocols,
		"http://localhost:8000": http.StatusForbidden,
	} {
		if got := handshakeStatus(t, r.appURL, origin); got != want {
			t.Errorf("Origin %s: status %d, want %d", origin, got, want)
		}
	}
	if n := r.logs.FilterMessage("TETHER_ALLOWED_ORIGINS=*: every web page the user opens can use the upstream credentials").Len(); n != 0 {
		t.Errorf("%d warnings about TETHER_ALLOWED_ORIGINS=* while it is not set", n)
	}

	anyOrigin := startProxy(t, map[string]string{"TETHER_UPSTREAM_URL": up.URL(), "TETHER_ALLOWED_ORIGINS": "*"})
	if got := handshakeStatus(t, anyOrigin.appURL, "https://anything.example"); got != http.StatusSwitchingProtocols {
		t.Errorf("TETHER_ALLOWED_ORIGINS=*: status %d, want 101", got)
	}
	anyOrigin.awaitLog(t, "TETHER_ALLOWED_ORIGINS=*: every web page the user opens can use the upstream credentials")
}

// handshakeStatus dials url with an Origin header and returns the HTTP status
// tether answered (101 when the socket opened; it is closed at once).
func handshakeStatus(t *testing.T, url, origin string) int {
	t.Helper()
	status := 0
	d := ws.Dialer{
		Timeout:       waitLimit,
		Header:        ws.HandshakeHeaderHTTP(http.Header{"Origin": {origin}}),
		OnStatusError: func(s int, _ []byte, _ io.Reader) { status = s },
	}
	conn, _, _, err := d.Dial(context.Background(), url)
	if err == nil {
		_ = conn.Close()
		return http.StatusSwitchingProtocols
	}
	if status == 0 {
		t.Fatalf("dial with Origin %s: %v", origin, err)
	}
	return status
}

// The admin server gives a client HTTP's usual header limits: a connection
// that sends nothing, or whose headers trickle in byte by byte (slowloris), is
// cut off at the read header timeout, however steadily it sends.
func TestAdminSlowloris(t *testing.T) {
	for _, trickle := range []bool{false, true} {
		t.Run(fmt.Sprintf("trickle=%v", trickle), func(t *testing.T) { adminSlowloris(t, trickle) })
	}
}

func adminSlowloris(t *testing.T, trickle bool) {
	const timeout = 300 * time.Millisecond
	a := newAdminServer("127.0.0.1:0", adminHandlers{}, zap.NewNop())
	a.srv.ReadHeaderTimeout = timeout // the production value is adminReadHeaderTimeout
	addr, err := a.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	// The server's clock starts when it reads the accepted connection, which
	// can be before Dial returns here: only a start taken before Dial is
	// sure to precede it.
	start := time.Now()
	nc, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if trickle {
		stop := trickleBytes(nc, "GET /healthz HTTP/1.1\r\nHost: admin\r\nX-Slow: "+strings.Repeat("a", 1<<10), timeout/20)
		defer stop()
	}
	_ = nc.SetReadDeadline(time.Now().Add(waitLimit))
	// net/http may answer 408 before closing; either way the connection ends.
	_, err = io.Copy(io.Discard, nc)
	elapsed := time.Since(start)
	if err != nil && !isReset(err) {
		t.Fatalf("reading until the admin server closes: %v", err)
	}
	if elapsed < timeout || elapsed > timeout+time.Second {
		t.Errorf("admin server closed the connection after %v, want about ReadHeaderTimeout (%v)", elapsed, timeout)
	}
}

func isReset(err error) bool {
	return strings.Contains(err.Error(), "connection reset")
}

// trickleBytes writes s one byte per interval on its own goroutine; stop ends
// it and waits for it.
func trickleBytes(nc net.Conn, s string, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := range len(s) {
			if _, err := nc.Write([]byte{s[i]}); err != nil {
				return
			}
			select {
			case <-tick.C:
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// ---- secrets ----

// syncBuffer is an io.Writer safe for concurrent use, standing for stderr.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// await returns the first submatch of re once the output contains it.
func (b *syncBuffer) await(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	var m []string
	eventually(t, "output matching "+re.String(), func() bool {
		m = re.FindStringSubmatch(b.String())
		return m != nil
	})
	return m[1]
}

// secrets are the credentials of TestSecretsNeverLogged: the token file's
// contents, a configured header value, the URL's password and two token-like
// query parameters.
var secrets = map[string]string{
	"token file":         "tok-Zq8w3KfPz1",
	"header value":       "hdr-Mv4r7TgYx2",
	"URL password":       "pw-Lk2s9DhWc3",
	"query token":        "qt-Nb6e1JuQa4",
	"query access_token": "at-Rp5c8XoEv5",
}

// Credentials never reach the logs or the metrics: tether runs as the binary
// runs it (runSidecar, with its stderr captured) at debug level, with a token
// file, a secret header, and a URL carrying a password and tokens in its
// query, through a 401, a success, a reset and a reconnect, a refused web
// page and an app that leaves; /metrics is scraped on the way. The upstream
// checks that each credential was actually sent.
func TestSecretsNeverLogged(t *testing.T) {
	for _, format := range []string{"json", "console"} {
		// The bearer token from the token file, or Basic auth from the
		// URL's userinfo: not both, the configuration refuses that.
		for _, auth := range []string{"token file", "URL userinfo"} {
			t.Run(format+"/"+auth, func(t *testing.T) { secretsRun(t, format, auth == "URL userinfo") })
		}
	}
}

func secretsRun(t *testing.T, format string, userinfo bool) {
	env := map[string]string{}
	wantAuth := "Bearer " + secrets["token file"]
	userPart := ""
	if userinfo {
		userPart = "svc-user:" + secrets["URL password"] + "@"
		wantAuth = "Basic " + base64.StdEncoding.EncodeToString([]byte("svc-user:"+secrets["URL password"]))
	} else {
		tokenFile := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tokenFile, []byte(secrets["token file"]+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		env["TETHER_UPSTREAM_TOKEN_FILE"] = tokenFile
	}
	var sentWrong sync.Map // what the upstream found missing, by handshake
	up := newTestUpstream(t, upstreamtest.Options{
		Handshake: func(h upstreamtest.Handshake) (int, http.Header) {
			checkCredentials(h, wantAuth, &sentWrong)
			if h.N == 1 {
				return http.StatusUnauthorized, nil
			}
			return 0, nil
		},
		OnConn: secretsUpstream,
	})
	upURL := fmt.Sprintf("ws://%s%s/feed?token=%s&access_token=%s&v=1",
		userPart, up.Addr(), secrets["query token"], secrets["query access_token"])
	for k, v := range map[string]string{
		"TETHER_UPSTREAM_URL":            upURL,
		"TETHER_UPSTREAM_HEADERS":        "X-Api-Key: " + secrets["header value"],
		"TETHER_LISTEN":                  "127.0.0.1:0",
		"TETHER_ADMIN_LISTEN":            "127.0.0.1:0",
		"TETHER_LOG_LEVEL":               "debug",
		"TETHER_LOG_FORMAT":              format,
		"TETHER_BACKOFF_BASE":            "20ms",
		"TETHER_BACKOFF_CAP":             "100ms",
		"TETHER_DRAIN_TIMEOUT":           "1s",
		"TETHER_HIDE_ON_RECONNECT_MATCH": "re:^hello$",
	} {
		env[k] = v
	}
	stderr := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runSidecar(ctx, env, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	listen := stderr.await(t, regexp.MustCompile(`tether started.*"listen":\s*"([^"]+)"`))
	admin := stderr.await(t, regexp.MustCompile(`admin server listening.*"addr":\s*"([^"]+)"`))

	appURL := "ws://" + listen + "/"
	if got := handshakeStatus(t, appURL, "https://evil.example"); got != http.StatusForbidden {
		t.Errorf("web page: status %d, want 403", got)
	}
	app := dialTestApp(t, appURL) // the first dial gets 401, the second connects
	app.expect(t, "hello")
	app.send(t, "one")
	app.expect(t, "one")
	app.send(t, "reset")
	app.expect(t, "back") // from the reconnected upstream, its "hello" hidden
	app.send(t, "two")
	app.expect(t, "two")
	metricsText := getText(t, "http://"+admin+"/metrics")
	app.close(t)
	app.expectClose(t, int(ws.StatusNormalClosure))
	cancel()
	if err := <-done; err != nil {
		t.Errorf("runSidecar: %v", err)
	}
	done <- nil // for Cleanup

	sentWrong.Range(func(n, what any) bool {
		t.Errorf("handshake %d: %s", n, what)
		return true
	})
	logs := stderr.String()
	for what, secret := range secrets {
		if strings.Contains(logs, secret) {
			t.Errorf("the %s appears in the logs", what)
		}
		if strings.Contains(metricsText, secret) {
			t.Errorf("the %s appears in /metrics", what)
		}
	}
	if strings.Contains(logs, wantAuth) || strings.Contains(metricsText, wantAuth) {
		t.Errorf("the Authorization value %q appears in the logs or /metrics", wantAuth)
	}
	// The run went through what it was meant to, at debug level, and the
	// URL was logged, redacted.
	wants := []string{"REDACTED", "401", "app handshake refused", "upstream connected", "upstream message hidden from the app"}
	if userinfo {
		wants = append(wants, "svc-user")
	}
	for _, want := range wants {
		if !regexp.MustCompile(want).MatchString(logs) {
			t.Errorf("the logs do not contain %q:\n%s", want, logs)
		}
	}
}

// checkCredentials records in wrong what handshake h lacks of the
// credentials: auth is the Authorization it must carry.
func checkCredentials(h upstreamtest.Handshake, auth string, wrong *sync.Map) {
	var missing []string
	if h.Header.Get("Authorization") != auth {
		missing = append(missing, "Authorization "+auth)
	}
	if h.Header.Get("X-Api-Key") != secrets["header value"] {
		missing = append(missing, "the X-Api-Key header")
	}
	if !strings.Contains(h.Path, "token="+secrets["query token"]) || !strings.Contains(h.Path, "access_token="+secrets["query access_token"]) {
		missing = append(missing, "the query tokens")
	}
	if len(missing) > 0 {
		wrong.Store(h.N, "upstream did not receive "+strings.Join(missing, ", "))
	}
}

// secretsUpstream greets every connection with "hello" (which tether shows
// the app once, TETHER_HIDE_ON_RECONNECT_MATCH, and logs at debug when it
// hides it), every connection after the first with "back" too; then it
// echoes, except "reset", which resets the connection.
func secretsUpstream(c *upstreamtest.Conn) {
	if c.Send("hello") != nil {
		return
	}
	if c.N() > 1 {
		_ = c.Send("back")
	}
	for {
		_, data, err := c.Read(c.Context())
		if err != nil {
			return
		}
		if string(data) == "reset" {
			_ = c.Reset()
			return
		}
		if c.Send(string(data)) != nil {
			return
		}
	}
}

// getText fetches url's body.
func getText(t *testing.T, url string) string {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: waitLimit}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(bufio.NewReader(resp.Body))
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return string(b)
}
