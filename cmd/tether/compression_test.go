package main

import (
	"context"
	"testing"

	"github.com/gobwas/httphead"
	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsflate"

	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// TestAppSideUncompressed: an app that offers permessage-deflate to tether
// is answered without it, whatever the upstream hop negotiated: the app
// side is never compressed.
func TestAppSideUncompressed(t *testing.T) {
	srv := newTestUpstream(t, upstreamtest.Options{}) // echo, no extensions
	r := startProxy(t, map[string]string{"TETHER_UPSTREAM_URL": srv.URL()})
	offer := wsflate.Parameters{}.Option()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	conn, _, hs, err := ws.Dialer{Extensions: []httphead.Option{offer}}.Dial(ctx, r.appURL)
	if err != nil {
		t.Fatalf("app dial: %v", err)
	}
	defer conn.Close()
	if len(hs.Extensions) != 0 {
		t.Errorf("tether accepted the app's extensions %v, want none", hs.Extensions)
	}
}
