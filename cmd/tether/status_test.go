package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/status"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// Secrets the status page must never show: in the upstream URL's query, in
// a static header, and in the messages.
const (
	secretQuery   = "url-secret-7f3a"
	secretHeader  = "header-secret-91c2"
	secretPayload = "payload-secret-4d0e"
)

// flakyScene is a running tether with two apps, whose upstream paths
// (TETHER_FORWARD_PATH) behave differently: /steady is served, /flaky is
// confirmed once, closed with 1012 "restart", and refused from then on with
// 503 and a Retry-After of an hour, far beyond any test, so its session
// stays waiting. With backoff delays alone it dialled again every 800 ms,
// and a page sampled during a dial (a browser's, seconds into a loaded
// run) showed it connecting, not waiting.
type flakyScene struct {
	tether *running
	steady *testApp
	flaky  *testApp
}

func startFlakyScene(t *testing.T) *flakyScene {
	t.Helper()
	up := newTestUpstream(t, upstreamtest.Options{
		Handshake: func(h upstreamtest.Handshake) (int, http.Header) {
			if strings.HasPrefix(h.Path, "/flaky") && h.N > 2 {
				return http.StatusServiceUnavailable, http.Header{"Retry-After": {"3600"}}
			}
			return 0, nil
		},
		OnConn: func(c *upstreamtest.Conn) {
			_ = c.Send(`{"t":"welcome"}`)
			if strings.HasPrefix(c.Path(), "/flaky") {
				_ = c.CloseWith(1012, "restart")
				return
			}
			for { // echo, as an ordinary upstream
				op, data, err := c.Read(c.Context())
				if err != nil {
					return
				}
				if op.IsData() {
					_ = c.Send(string(data))
				}
			}
		},
	})
	r := startProxy(t, map[string]string{
		"TETHER_UPSTREAM_URL":     up.URL() + "?token=" + secretQuery,
		"TETHER_UPSTREAM_HEADERS": "X-Api-Key: " + secretHeader,
		"TETHER_FORWARD_PATH":     "true",
		"TETHER_CONFIRM_MATCH":    `{"t":"welcome"}`,
		"TETHER_BACKOFF_BASE":     "400ms",
		"TETHER_BACKOFF_CAP":      "800ms",
		"TETHER_RESTART_FLOOR":    "300ms",
	})
	s := &flakyScene{tether: r}
	s.steady = dialTestApp(t, strings.TrimSuffix(r.appURL, "/")+"/steady")
	s.steady.expect(t, `{"t":"welcome"}`)
	s.steady.send(t, secretPayload)
	s.steady.expect(t, secretPayload)
	s.flaky = dialTestApp(t, strings.TrimSuffix(r.appURL, "/")+"/flaky")
	s.flaky.expect(t, `{"t":"welcome"}`)
	eventually(t, "the flaky session waiting after refused dials", func() bool {
		doc := fetchDoc(t, r.adminURL)
		return len(doc.Sessions) == 2 && doc.Sessions[1].State == "waiting" && doc.Sessions[1].Attempt >= 2
	})
	s.flaky.send(t, secretPayload) // queued: its upstream refuses it for good
	eventually(t, "the flaky session's message queued", func() bool {
		return fetchDoc(t, r.adminURL).Sessions[1].OutboxMessages == 1
	})
	return s
}

// fetchDoc gets /status and decodes it.
func fetchDoc(t *testing.T, adminURL string) status.Doc {
	t.Helper()
	code, body := get(t, adminURL+"/status")
	if code != http.StatusOK {
		t.Fatalf("/status = %d %s", code, body)
	}
	var doc status.Doc
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("/status: %v\n%s", err, body)
	}
	return doc
}

func TestStatusDocument(t *testing.T) {
	s := startFlakyScene(t)
	doc := fetchDoc(t, s.tether.adminURL)
	if doc.Version != version || doc.UpstreamKind != "websocket" || doc.Draining || doc.MaxSessions != 1024 {
		t.Errorf("document head %+v", doc)
	}
	steady, flaky := doc.Sessions[0], doc.Sessions[1]
	switch {
	case steady.ID >= flaky.ID:
		t.Errorf("sessions not in order: %d, %d", steady.ID, flaky.ID)
	case steady.State != "confirmed" || !steady.Live || steady.Attempt != 0 || steady.DownSince != nil || steady.NextRetry != nil:
		t.Errorf("steady session %+v", steady)
	case !strings.HasSuffix(steady.Upstream, "/steady") || steady.Listener != "ws":
		t.Errorf("steady session upstream %q listener %q", steady.Upstream, steady.Listener)
	}
	switch {
	case flaky.Live || flaky.NextRetry == nil || flaky.DownSince == nil || flaky.DownSeconds <= 0:
		t.Errorf("flaky session not shown down and waiting: %+v", flaky)
	case flaky.LastClose == nil || flaky.LastClose.CloseCode != 1012 || flaky.LastClose.CloseReason != "restart":
		t.Errorf("flaky session's last close %+v, want 1012 \"restart\"", flaky.LastClose)
	case flaky.LastFailure == nil || flaky.LastFailure.Reason != "http_5xx" || flaky.LastFailure.HTTPStatus != 503:
		t.Errorf("flaky session's last failure %+v, want the 503", flaky.LastFailure)
	case flaky.OutboxMessages != 1 || flaky.OutboxBytes != len(secretPayload):
		t.Errorf("flaky session's outbox %d messages %d bytes, want the queued message", flaky.OutboxMessages, flaky.OutboxBytes)
	case len(flaky.Recent) < 3 || flaky.Recent[0].Event != "connected" || flaky.Recent[1].Event != "lost":
		t.Errorf("flaky session's recent events %+v, want connected, lost, dial_failed…", flaky.Recent)
	}
	if !flaky.NextRetry.After(doc.Now.Add(-time.Second)) {
		t.Errorf("next retry %v long before the document's time %v", flaky.NextRetry, doc.Now)
	}
}

// TestStatusHoldsNoSecrets reads every status representation for the
// scene's secrets.
func TestStatusHoldsNoSecrets(t *testing.T) {
	s := startFlakyScene(t)
	pages := map[string]string{}
	for _, path := range []string{"/", "/status"} {
		code, body := get(t, s.tether.adminURL+path)
		if code != http.StatusOK {
			t.Fatalf("%s = %d", path, code)
		}
		pages[path] = body
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"status"}, map[string]string{"TETHER_ADMIN_LISTEN": strings.TrimPrefix(s.tether.adminURL, "http://")}, &out, io.Discard); err != nil {
		t.Fatalf("tether status: %v", err)
	}
	pages["tether status"] = out.String()
	for where, text := range pages {
		for _, secret := range []string{secretQuery, secretHeader, secretPayload, "token="} {
			if strings.Contains(text, secret) {
				t.Errorf("%s shows %q", where, secret)
			}
		}
	}
}

func TestStatusPageHTML(t *testing.T) {
	s := startFlakyScene(t)
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: waitLimit}).Get(s.tether.adminURL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	page := string(body)
	for header, want := range map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
		"Cache-Control":           "no-store",
	} {
		if got := resp.Header.Get(header); got != want {
			t.Errorf("%s: %q, want %q", header, got, want)
		}
	}
	for _, want := range []string{
		`<meta http-equiv="refresh" content="2">`,
		`data-state="confirmed"`, `data-state="waiting"`,
		`1012 &#34;restart&#34;`, "HTTP 503", "lost",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if n := strings.Count(page, `<tr class="session"`); n != 2 {
		t.Errorf("%d session rows, want 2", n)
	}
	for _, banned := range []string{"<script", "src=", "http://", "https://", "@import", "url("} {
		if strings.Contains(page, banned) {
			t.Errorf("the page holds %q: it must load nothing and run nothing", banned)
		}
	}
	if code, _ := get(t, s.tether.adminURL+"/nothing-here"); code != http.StatusNotFound {
		t.Errorf("/nothing-here = %d, want 404: only / is the page", code)
	}
}

func TestStatusCommand(t *testing.T) {
	s := startFlakyScene(t)
	addr := strings.TrimPrefix(s.tether.adminURL, "http://")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"status", "-addr", addr}, nil, &out, io.Discard); err != nil {
		t.Fatalf("tether status -addr %s: %v", addr, err)
	}
	text := out.String()
	for _, want := range []string{"SESSION", "#1", "#2", "confirmed", "waiting", `1012 "restart"`, "HTTP 503", "1 msg, " + fmt.Sprint(len(secretPayload)) + " B"} {
		if !strings.Contains(text, want) {
			t.Errorf("tether status lacks %q:\n%s", want, text)
		}
	}
	out.Reset()
	if err := run(context.Background(), []string{"status", "-json"}, map[string]string{"TETHER_ADMIN_LISTEN": addr}, &out, io.Discard); err != nil {
		t.Fatalf("tether status -json: %v", err)
	}
	var doc status.Doc
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.Sessions) != 2 {
		t.Errorf("tether status -json: %v, %d sessions\n%s", err, len(doc.Sessions), out.String())
	}
}

func TestStatusCommandErrors(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want string
		code int
	}{
		{[]string{"status"}, map[string]string{"TETHER_ADMIN_LISTEN": "off"}, "TETHER_ADMIN_LISTEN is off", 2},
		{[]string{"status", "-addr", "nowhere"}, nil, "-addr: invalid address", 2},
		{[]string{"status", "extra"}, nil, `unexpected argument "extra"`, 2},
		{[]string{"status", "-addr", "127.0.0.1:1"}, nil, "no tether admin server answered at 127.0.0.1:1", 1},
	}
	for _, tt := range tests {
		err := run(context.Background(), tt.args, tt.env, io.Discard, io.Discard)
		var stderr bytes.Buffer
		if code := exitCode(err, &stderr); code != tt.code || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("tether %q: exit %d %q, want %d and %q", tt.args, code, stderr.String(), tt.code, tt.want)
		}
	}
	if target, err := statusTarget("", map[string]string{"TETHER_ADMIN_LISTEN": "0.0.0.0:9090"}); err != nil || target != "127.0.0.1:9090" {
		t.Errorf("a wildcard admin address is asked at %q (%v), want 127.0.0.1:9090", target, err)
	}
	if target, _ := statusTarget("", nil); target != "127.0.0.1:9090" {
		t.Errorf("without TETHER_ADMIN_LISTEN: %q, want its default", target)
	}
	if target, _ := statusTarget("", map[string]string{"TETHER_ADMIN_LISTEN": "[::]:9"}); target != "[::1]:9" {
		t.Errorf("[::]:9 is asked at %q, want [::1]:9", target)
	}
}
