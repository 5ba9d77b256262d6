package template

import (
	"strings"
	"testing"
)

// A subscribe replay rebuilds the app's message from its parts and the
// stream's resume point; get renders JSON as the message holds it, null
// when absent, and a misspelt field is refused at parse time.
func TestSubscribeReplay(t *testing.T) {
	var r SubscribeReplay
	text := `{"id":{{get .Message "id"}},"subscribe":{"channel":{{json .Stream}},"recover":true,"offset":{{.LastSeq}},"token":{{get .Message "subscribe.token"}}}}`
	if err := r.UnmarshalText([]byte(text)); err != nil {
		t.Fatal(err)
	}
	if !r.IsSet() || r.String() != text {
		t.Fatalf("IsSet %v, String %q", r.IsSet(), r.String())
	}
	got, err := r.Render(Replay{Stream: `a"b`, LastSeq: 9, Message: `{"id":"r7","subscribe":{"channel":"a\"b"}}`})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"r7","subscribe":{"channel":"a\"b","recover":true,"offset":9,"token":null}}`; string(got) != want {
		t.Errorf("Render = %s, want %s", got, want)
	}
	err = r.UnmarshalText([]byte(`{"offset":{{.LastSeqq}}}`))
	if err == nil || !strings.Contains(err.Error(), ".LastSeq .Epoch .Message") {
		t.Errorf("misspelt field: %v, want an error listing the fields", err)
	}
	if err := r.UnmarshalText(nil); err != nil || r.IsSet() {
		t.Errorf("empty text: %v, set %v", err, r.IsSet())
	}
}
