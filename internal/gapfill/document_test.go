package gapfill

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

func TestFetchDocumentAnswers(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string // "" for an error
		msg  string
	}{
		{"Binance depth snapshot", `{"lastUpdateId":160,"bids":[["1.0","2"]],"asks":[]}`, `{"lastUpdateId":160,"bids":[["1.0","2"]],"asks":[]}`, ""},
		{"trimmed", " \r\n{\"a\":1}\n", `{"a":1}`, ""},
		{"an array is one value", `[1,2]`, `[1,2]`, ""},
		{"empty", "  \n", "", "gapfill: JSON document (byte 3): empty answer: want one JSON value"},
		{"two values", `{"a":1} {"a":2}`, "", "gapfill: JSON document (byte 7): data after the JSON value: want one"},
		{"not JSON", `<html>`, "", "gapfill: JSON document (byte 1): invalid character '<' looking for beginning of value"},
		{"cut short", `{"a":`, "", "gapfill: JSON document (byte 5): unexpected end of answer"},
		{"not UTF-8", "\"\xff\"", "", "gapfill: JSON document (byte 0): not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, tt.body) })
			got, err := newClient(t, Options{}).FetchDocument(testContext(t), srv.URL)
			if tt.want != "" {
				if err != nil || string(got) != tt.want {
					t.Fatalf("FetchDocument = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			var pe *ParseError
			if !errors.As(err, &pe) || !pe.Document || Transient(err) {
				t.Fatalf("FetchDocument error %v, want a final ParseError on the document", err)
			}
			if err.Error() != tt.msg {
				t.Fatalf("message %q, want %q", err, tt.msg)
			}
		})
	}
}

func TestFetchDocumentRetry(t *testing.T) {
	var calls atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		default:
			fmt.Fprint(w, `{"lastUpdateId":7}`)
		}
	})
	got, err := newClient(t, Options{}).FetchDocumentRetry(testContext(t), srv.URL, noBackoff)
	if err != nil || string(got) != `{"lastUpdateId":7}` || calls.Load() != 2 {
		t.Fatalf("FetchDocumentRetry = %q, %v after %d requests; want the snapshot after 2", got, err, calls.Load())
	}
}

func TestFetchDocumentSizeLimit(t *testing.T) {
	var calls atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		fmt.Fprintf(w, `{"pad":%q}`, strings.Repeat("x", 100))
	})
	_, err := newClient(t, Options{MaxBytes: 100}).FetchDocumentRetry(testContext(t), srv.URL, noBackoff)
	var tl *TooLargeError
	if !errors.As(err, &tl) || calls.Load() != 1 {
		t.Fatalf("FetchDocumentRetry error %v after %d requests, want TooLargeError after 1", err, calls.Load())
	}
}
