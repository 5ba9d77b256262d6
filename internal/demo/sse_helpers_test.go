package demo

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/tetherproxy/tether/internal/sse"
)

// startTestSSEFeed starts a feed the test closes; n may be nil.
func startTestSSEFeed(t *testing.T, rate int, n *narrator) *sseFeed {
	t.Helper()
	f, err := startSSEFeed(feedOptions{rate: rate, rng: rand.New(rand.NewPCG(1, 2)), now: time.Now, narr: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// testHTTPClient returns a client whose idle connections the test closes,
// so goleak finds none of its goroutines.
func testHTTPClient(t *testing.T) *http.Client {
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// rawStream is one request of an event stream, read item by item; every
// read is bounded by testTimeout through the request's context.
type rawStream struct {
	t    *testing.T
	resp *http.Response
	r    *sse.Reader
	stop context.CancelFunc
}

// getStream requests url with lastID as Last-Event-ID ("" sends none).
func getStream(t *testing.T, c *http.Client, url, lastID string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", url, err)
	}
	t.Cleanup(func() {
		_ = resp.Body.Close()
		cancel()
	})
	return resp
}

// openRawStream requests url and requires a stream.
func openRawStream(t *testing.T, c *http.Client, url, lastID string) *rawStream {
	t.Helper()
	resp := getStream(t, c, url, lastID)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d, want 200", url, resp.StatusCode)
	}
	return &rawStream{t: t, resp: resp, r: sse.NewReader(resp.Body, sse.Options{LastEventID: lastID}), stop: func() { _ = resp.Body.Close() }}
}

// next returns the next item, failing the test at the stream's end.
func (s *rawStream) next() sse.Item {
	s.t.Helper()
	it, err := s.r.Next()
	if err != nil {
		s.t.Fatalf("stream ended: %v", err)
	}
	return it
}

// event returns the next event and the seq in its data, skipping comments
// and retry fields.
func (s *rawStream) event() (sse.Event, int64) {
	s.t.Helper()
	for {
		it := s.next()
		if it.Kind != sse.KindEvent {
			continue
		}
		var m feedMessage
		if err := json.Unmarshal([]byte(it.Event.Data), &m); err != nil || m.T != "event" {
			s.t.Fatalf("event data %q is not a feed event", it.Event.Data)
		}
		return it.Event, m.Seq
	}
}

// end reads to the end of the stream and returns the error that ended it.
func (s *rawStream) end() error {
	for {
		if _, err := s.r.Next(); err != nil {
			return err
		}
	}
}

// isCleanEnd reports a response that ended with its final chunk.
func isCleanEnd(err error) bool { return err == io.EOF }
