package sse

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"
)

// TestEncoderOverHTTP serves events with an Encoder the way tether's local
// endpoint does (one Write and one Flush per event) and reads them with a
// Reader over a real HTTP response. The handler writes each event only
// after the client has received the previous one, so an event held back
// in a buffer would stall the test instead of passing unnoticed.
func TestEncoderOverHTTP(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	events := []Event{
		{Type: DefaultType, Data: "{\"seq\":1}", ID: "1"},
		{Type: "update", Data: "multi\nline", ID: "2"},
		{Type: DefaultType, Data: "", ID: "2"},
	}
	received := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		enc := NewEncoder(w)
		_ = enc.Retry(3 * time.Second)
		_ = enc.Comment("hello")
		for _, ev := range events {
			if enc.Event(ev) != nil || rc.Flush() != nil {
				return
			}
			select {
			case <-received:
			case <-r.Context().Done():
				return
			}
		}
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	r := NewReader(resp.Body, Options{})
	want := []Item{retry(3000), comment("hello")}
	for _, ev := range events {
		want = append(want, Item{Kind: KindEvent, Event: ev})
	}
	for i, w := range want {
		got, err := r.Next()
		if err != nil || !reflect.DeepEqual(got, w) {
			t.Fatalf("item %d = %#v, %v; want %#v", i, got, err, w)
		}
		if got.Kind == KindEvent {
			received <- struct{}{}
		}
	}
	if r.LastEventID() != "2" {
		t.Errorf("LastEventID = %q, want 2", r.LastEventID())
	}
}
