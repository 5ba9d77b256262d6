package sse

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// fuzzSeeds are streams that reach every rule; the committed corpus in
// testdata/fuzz adds the inputs fuzzing found interesting.
var fuzzSeeds = []string{
	"data: YHOO\ndata: +2\ndata: 10\n\n",
	": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n",
	"data\n\ndata\ndata\n\ndata:",
	"\uFEFFevent: add\r\ndata: 1\r\n\r\nretry: 1000\rid: 5\r\r",
	"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n",
	"id: 1\x00\ndata: \xE2\x82A\xF0\x9F\n\nid\n\n:\xFF\n",
	"retry: 99999999999999999999\nretry: 1a\nretry:\nretry:  1\n",
	"data: a\r\n\ndata: b\n\r\n",
}

// FuzzReader checks the streaming Reader against the reference
// implementation in ref_test.go: for any bytes, read in any pieces, with
// or without a seeded last event ID, the Reader reports exactly the items
// the standard's prose produces, and ends with the same last event ID and
// reconnection time. With a small MaxEventSize it reports a prefix of
// them, and stops only with a *TooLargeError.
func FuzzReader(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add([]byte(s), uint64(i), "")
	}
	f.Add([]byte("data: a\n\n"), uint64(7), "41")
	f.Fuzz(func(t *testing.T, input []byte, seed uint64, seedID string) {
		ref := refParse(input, seedID)
		rnd := rand.New(rand.NewPCG(seed, seed>>32))
		r := NewReader(&randomReader{data: input, rnd: rnd}, Options{
			MaxEventSize: 4*len(input) + 1, // never reached: decoding at most triples
			LastEventID:  seedID,
		})
		got, err := readAll(r)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if !reflect.DeepEqual(got, ref.items) {
			t.Fatalf("items\n got %s\nwant %s", short(got), short(ref.items))
		}
		if r.LastEventID() != ref.lastEventID {
			t.Fatalf("LastEventID = %q, want %q", r.LastEventID(), ref.lastEventID)
		}
		if d, ok := r.Retry(); d != ref.retry || ok != ref.hasRetry {
			t.Fatalf("Retry = %v, %v; want %v, %v", d, ok, ref.retry, ref.hasRetry)
		}
		checkLimited(t, input, seed, seedID, ref.items)
	})
}

// checkLimited reads input again under a small limit.
func checkLimited(t *testing.T, input []byte, seed uint64, seedID string, all []Item) {
	limit := 1 + int(seed%32)
	rnd := rand.New(rand.NewPCG(seed>>1, seed))
	r := NewReader(&randomReader{data: input, rnd: rnd}, Options{MaxEventSize: limit, LastEventID: seedID})
	got, err := readAll(r)
	var tl *TooLargeError
	if err != nil && (!errors.As(err, &tl) || tl.Limit != limit) {
		t.Fatalf("limit %d: err = %v, want a *TooLargeError", limit, err)
	}
	if len(got) > len(all) || (len(got) > 0 && !reflect.DeepEqual(got, all[:len(got)])) {
		t.Fatalf("limit %d: items are not a prefix\n got %s\n all %s", limit, short(got), short(all))
	}
	if err == nil && len(got) != len(all) {
		t.Fatalf("limit %d: stopped early without an error", limit)
	}
}

// FuzzDecode checks appendDecoded against the Encoding standard's decoder
// as written in refDecode (which also strips a BOM, so none is given).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"abc", "\xE2\x82A", "\xF0\x9F\x98\x80", "\xED\xA0\x80", "\xC0\xAF", "\xF4\x90", "é\xFF世"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if bytes.HasPrefix(in, []byte(bom)) {
			return
		}
		got := string(appendDecoded(nil, in))
		if want := refDecode(in); got != want {
			t.Fatalf("appendDecoded(%q) = %q, want %q", in, got, want)
		}
		if utf8.Valid(in) && got != string(in) {
			t.Fatalf("valid input changed: %q -> %q", in, got)
		}
	})
}

// FuzzRoundTrip encodes a short session with the Encoder and reads it back
// with the Reader. What arrives is what was sent, as a client sees it:
// line breaks in data become LF, invalid UTF-8 becomes U+FFFD, an empty
// type is "message", and every event carries the id in force. Values the
// encoder cannot carry are refused and leave no trace.
func FuzzRoundTrip(f *testing.F) {
	f.Add("update", "a\nb\r\nc\rd", "1", "x", "", "hb", uint32(1500), "2")
	f.Add("", "", "", "", "\n", "", uint32(0), "")
	f.Add("t\n", " x ", "\x00", "y\r", "\xE2\x82", "a\r\n", uint32(7), "\xFF")
	f.Fuzz(func(t *testing.T, typ, data, id1, data2, data3, text string, retryMs uint32, id2 string) {
		var out bytes.Buffer
		e := NewEncoder(&out)
		var want []Item
		sent := "" // the last event ID the client holds, decoded
		send := func(ev Event) {
			if err := e.Event(ev); err != nil {
				return
			}
			sent = decodeString(ev.ID)
			want = append(want, Item{Kind: KindEvent, Event: Event{
				Type: defaultType(decodeString(ev.Type)),
				Data: decodeString(normalize(ev.Data)),
				ID:   sent,
			}})
		}
		send(Event{Type: typ, Data: data, ID: id1})
		if e.Comment(text) == nil {
			for _, line := range strings.Split(normalize(text), "\n") {
				want = append(want, comment(decodeString(line)))
			}
		}
		if e.Retry(time.Duration(retryMs)*time.Millisecond) == nil {
			want = append(want, retry(int64(retryMs)))
		}
		send(Event{Type: typ, Data: data2, ID: id1})
		if e.ID(id2) == nil && decodeString(id2) != sent {
			sent = decodeString(id2)
			want = append(want, idItem(sent))
		}
		send(Event{Data: data3, ID: e.lastID})

		got := mustReadAll(t, NewReader(&out, Options{MaxEventSize: 1 << 22}))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip of %q\n got %s\nwant %s", out.String(), short(got), short(want))
		}
	})
}

func decodeString(s string) string { return string(appendDecoded(nil, []byte(s))) }

func defaultType(t string) string {
	if t == "" {
		return DefaultType
	}
	return t
}

// normalize turns CRLF and CR into LF, as line splitting does.
func normalize(s string) string {
	return strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(s)
}
