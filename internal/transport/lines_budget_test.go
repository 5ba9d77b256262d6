package transport

import (
	"strings"
	"testing"

	"github.com/tetherproxy/tether/internal/budget"
)

// A line longer than the read buffer every connection keeps counts what
// it grew the buffer by on the session's account, even with no room on
// the budget (the reader never waits for it), until the buffer is let go;
// a line cut off by the app's close gives its bytes back with the error.
func TestLongLineCounts(t *testing.T) {
	const long = 1 << 20
	b, err := budget.New(budget.Options{Limit: 16 << 10, Share: 16 << 10, Sessions: 1}) // no pool
	if err != nil {
		t.Fatal(err)
	}
	acct := b.Open()
	c, client, _ := newTestLineConn(t, LineOptions{MaxLineBytes: 2 * long, Account: acct})
	goWriteChunks(t, client, strings.Repeat("L", long)+"\nshort\n"+strings.Repeat("C", long), 64<<10)
	if _, data, err := c.ReadMessage(); err != nil || len(data) != long {
		t.Fatalf("first line: %d bytes, %v; want %d bytes", len(data), err, long)
	}
	if got, want := acct.Held(), int64(len(c.rbuf)-maxRetainedLineBuffer); got != want || got <= 0 {
		t.Fatalf("the account holds %d bytes with a %d-byte read buffer, want %d", got, len(c.rbuf), want)
	}
	if _, data, err := c.ReadMessage(); err != nil || string(data) != "short" {
		t.Fatalf("second line: %q, %v", data, err)
	}
	if _, _, err := c.ReadMessage(); err == nil {
		t.Fatal("a line cut off by the app's close was returned")
	}
	if got := b.Used(); got != 0 {
		t.Fatalf("after the reader stopped the budget holds %d bytes, want 0", got)
	}
}
