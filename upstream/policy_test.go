package upstream_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tetherproxy/tether/upstream"
)

func mustCodeSet(t testing.TB, s string) upstream.CodeSet {
	t.Helper()
	c, err := upstream.ParseCodeSet(s)
	if err != nil {
		t.Fatalf("ParseCodeSet(%q): %v", s, err)
	}
	return c
}

func TestParseCodeSet(t *testing.T) {
	tests := []struct {
		in      string
		want    string // canonical String()
		wantErr string
	}{
		{in: "", want: ""},
		{in: "   ", want: ""},
		{in: "1002", want: "1002"},
		{in: upstream.DefaultPermanentCodes, want: "1002-1003,1007-1010"},
		{in: upstream.DefaultReauthCodes, want: "4001,4003"},
		{in: "1002,1007-1010,4500-4999", want: "1002,1007-1010,4500-4999"},
		{in: " 4500 - 4999 , 1002 ", want: "1002,4500-4999"},
		{in: "1010,1009,1008", want: "1008-1010"},
		{in: "1000-1005,1003-1010,1011", want: "1000-1011"},
		{in: "1002,1002", want: "1002"},
		{in: "3000-3000", want: "3000"},
		{in: "1000-4999", want: "1000-4999"},
		{in: "10x2", wantErr: `"10x2": not a close code`},
		{in: "1002,10x2", wantErr: `"10x2": not a close code`},
		{in: "+1002", wantErr: `"+1002": not a close code`},
		{in: "1010-1002", wantErr: `range "1010-1002" is reversed`},
		{in: "10x2-1010", wantErr: `range "10x2-1010": "10x2": not a close code`},
		{in: "1002-", wantErr: `range "1002-": "": not a close code`},
		{in: "-1002", wantErr: `range "-1002": "": not a close code`},
		{in: "1002-1003-1004", wantErr: `range "1002-1003-1004": "1003-1004": not a close code`},
		{in: "999", wantErr: `"999": close code out of range 1000-4999`},
		{in: "5000", wantErr: `"5000": close code out of range 1000-4999`},
		{in: "99999999999999999999999", wantErr: `"99999999999999999999999": close code out of range 1000-4999`},
		{in: "1002-5000", wantErr: `range "1002-5000": "5000": close code out of range 1000-4999`},
		{in: "1005", wantErr: `"1005": never sent in a close frame (RFC 6455 §7.4.1 reserves it for a close frame without a code)`},
		{in: "1002,1006", wantErr: `"1006": never sent in a close frame (RFC 6455 §7.4.1 reserves it for a connection that ended without one)`},
		{in: "1015", wantErr: `"1015": never sent in a close frame (RFC 6455 §7.4.1 reserves it for a failed TLS handshake)`},
		{in: "1000-1015", want: "1000-1015"}, // a range may span them
		{in: "1002,,1003", wantErr: `empty element at position 2`},
		{in: "1002,", wantErr: `empty element at position 2`},
	}
	for _, tt := range tests {
		got, err := upstream.ParseCodeSet(tt.in)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("ParseCodeSet(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.String() != tt.want {
			t.Errorf("ParseCodeSet(%q) = %q, %v; want %q", tt.in, got.String(), err, tt.want)
		}
	}
}

func TestCodeSetContains(t *testing.T) {
	set := mustCodeSet(t, "1002,1007-1010,4500-4999")
	in := []int{1002, 1007, 1008, 1010, 4500, 4777, 4999}
	out := []int{0, -1, 999, 1000, 1001, 1003, 1006, 1011, 4499, 5000, 1 << 40}
	for _, c := range in {
		if !set.Contains(c) {
			t.Errorf("Contains(%d) = false, want true", c)
		}
	}
	for _, c := range out {
		if set.Contains(c) {
			t.Errorf("Contains(%d) = true, want false", c)
		}
	}
	var empty upstream.CodeSet
	if empty.Contains(1000) || empty.String() != "" {
		t.Errorf("zero CodeSet is not empty: %q", empty.String())
	}
}

func TestCodeSetWithout(t *testing.T) {
	tests := []struct{ set, other, want string }{
		{"4000-4999", "4001,4003", "4000,4002,4004-4999"},
		{"4001,4003", "4000-4999", ""},
		{"1002-1003,1007-1010", "1008", "1002-1003,1007,1009-1010"},
		{"1002-1003,1007-1010", "", "1002-1003,1007-1010"},
		{"", "1000-4999", ""},
		{"1000-1010", "1000,1010", "1001-1009"},
		{"1000-1010,3000-3010", "1005-3005", "1000-1004,3006-3010"},
		{"1002", "4000-4999", "1002"},
	}
	for _, tt := range tests {
		got := mustCodeSet(t, tt.set).Without(mustCodeSet(t, tt.other))
		if got.String() != tt.want {
			t.Errorf("%q without %q = %q, want %q", tt.set, tt.other, got.String(), tt.want)
		}
		for code := 1000; code <= 4999; code++ {
			want := mustCodeSet(t, tt.set).Contains(code) && !mustCodeSet(t, tt.other).Contains(code)
			if got.Contains(code) != want {
				t.Fatalf("%q without %q: Contains(%d) = %v", tt.set, tt.other, code, !want)
			}
		}
	}
}

func TestCodeSetUnmarshalText(t *testing.T) {
	var c upstream.CodeSet
	if err := c.UnmarshalText([]byte("4001, 4003")); err != nil || !c.Contains(4003) {
		t.Fatalf("UnmarshalText = %v, set %q", err, c.String())
	}
	if err := c.UnmarshalText([]byte("nope")); err == nil {
		t.Fatal("UnmarshalText(nope) succeeded")
	}
	if c.String() != "4001,4003" {
		t.Errorf("failed UnmarshalText changed the set to %q", c.String())
	}
}

// FuzzParseCodeSet: any accepted list only holds valid codes, and its
// canonical String parses back to the same set.
func FuzzParseCodeSet(f *testing.F) {
	for _, s := range []string{"", upstream.DefaultPermanentCodes, "1002,1007-1010,4500-4999", "1010-1002", "1002,,", " 1000 - 4999 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := upstream.ParseCodeSet(s)
		if err != nil {
			return
		}
		again, err := upstream.ParseCodeSet(c.String())
		if err != nil {
			t.Fatalf("String %q of %q does not parse: %v", c.String(), s, err)
		}
		if again.String() != c.String() {
			t.Fatalf("round trip of %q: %q != %q", s, again.String(), c.String())
		}
		for code := 0; code < 6000; code++ {
			has := c.Contains(code)
			if has && (code < 1000 || code > 4999) {
				t.Fatalf("%q contains invalid code %d", s, code)
			}
			if has != again.Contains(code) {
				t.Fatalf("%q and its round trip disagree on %d", s, code)
			}
		}
	})
}

func defaultClosePolicy(t testing.TB) upstream.ClosePolicy {
	return upstream.ClosePolicy{
		Permanent:     mustCodeSet(t, upstream.DefaultPermanentCodes),
		Reauth:        mustCodeSet(t, upstream.DefaultReauthCodes),
		RestartFloor:  5 * time.Second,
		TryAgainFloor: 15 * time.Second,
	}
}

func TestClassifyDefaults(t *testing.T) {
	p := defaultClosePolicy(t)
	tests := []struct {
		code  int
		want  upstream.Action
		floor time.Duration
	}{
		{1000, upstream.ActionReconnect, 0},
		{1001, upstream.ActionReconnect, 0},
		{1006, upstream.ActionReconnect, 0},
		{1011, upstream.ActionReconnect, 0},
		{1012, upstream.ActionReconnect, 5 * time.Second},
		{1013, upstream.ActionReconnect, 15 * time.Second},
		{1014, upstream.ActionReconnect, 0},
		{3000, upstream.ActionReconnect, 0},
		{4000, upstream.ActionReconnect, 0},
		{4002, upstream.ActionReconnect, 0},
		{1004, upstream.ActionReconnect, 0},
		{1005, upstream.ActionReconnect, 0},
		{1002, upstream.ActionStop, 0},
		{1003, upstream.ActionStop, 0},
		{1007, upstream.ActionStop, 0},
		{1008, upstream.ActionStop, 0},
		{1009, upstream.ActionStop, 0},
		{1010, upstream.ActionStop, 0},
		{4001, upstream.ActionReauth, 0},
		{4003, upstream.ActionReauth, 0},
	}
	for _, tt := range tests {
		a, floor := p.Classify(tt.code)
		if a != tt.want || floor != tt.floor {
			t.Errorf("Classify(%d) = %v, %v; want %v, %v", tt.code, a, floor, tt.want, tt.floor)
		}
	}
}

// TestClassifyConfigWins: the configured sets come before the 1012/1013
// floors, and Permanent before Reauth.
func TestClassifyConfigWins(t *testing.T) {
	p := upstream.ClosePolicy{
		Permanent:     mustCodeSet(t, "1012,4000-4099"),
		Reauth:        mustCodeSet(t, "1013,4001"),
		RestartFloor:  5 * time.Second,
		TryAgainFloor: 15 * time.Second,
	}
	tests := []struct {
		code int
		want upstream.Action
	}{
		{1012, upstream.ActionStop},
		{1013, upstream.ActionReauth},
		{4001, upstream.ActionStop},
		{1008, upstream.ActionReconnect},
	}
	for _, tt := range tests {
		if a, floor := p.Classify(tt.code); a != tt.want || floor != 0 {
			t.Errorf("Classify(%d) = %v, %v; want %v, 0", tt.code, a, floor, tt.want)
		}
	}
}

func TestClassifyZeroPolicy(t *testing.T) {
	var p upstream.ClosePolicy
	for _, code := range []int{1002, 1008, 1012, 1013, 4001} {
		if a, floor := p.Classify(code); a != upstream.ActionReconnect || floor != 0 {
			t.Errorf("zero policy Classify(%d) = %v, %v; want reconnect, 0", code, a, floor)
		}
	}
}

func TestClassifyStatus(t *testing.T) {
	tests := []struct {
		status int
		want   upstream.StatusClass
	}{
		{401, upstream.StatusAuth},
		{403, upstream.StatusAuth},
		{400, upstream.StatusPermanent},
		{404, upstream.StatusPermanent},
		{405, upstream.StatusPermanent},
		{410, upstream.StatusPermanent},
		{408, upstream.StatusTransient},
		{429, upstream.StatusTransient},
		{500, upstream.StatusTransient},
		{502, upstream.StatusTransient},
		{503, upstream.StatusTransient},
		{504, upstream.StatusTransient},
		{409, upstream.StatusTransient},
		{425, upstream.StatusTransient},
		{426, upstream.StatusTransient},
		{200, upstream.StatusTransient},
		{302, upstream.StatusTransient},
		{0, upstream.StatusTransient},
	}
	for _, tt := range tests {
		if got := upstream.ClassifyStatus(tt.status); got != tt.want {
			t.Errorf("ClassifyStatus(%d) = %v, want %v", tt.status, got, tt.want)
		}
	}
}

func TestEnumStrings(t *testing.T) {
	tests := []struct {
		v    fmt.Stringer
		want string
	}{
		{upstream.ActionReconnect, "reconnect"},
		{upstream.ActionReauth, "reauth"},
		{upstream.ActionStop, "stop"},
		{upstream.Action(7), "Action(7)"},
		{upstream.StatusTransient, "transient"},
		{upstream.StatusAuth, "auth"},
		{upstream.StatusPermanent, "permanent"},
		{upstream.StatusClass(-1), "StatusClass(-1)"},
	}
	for _, tt := range tests {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("%T(%d).String() = %q, want %q", tt.v, tt.v, got, tt.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, time.March, 4, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"absent", "", 0, false},
		{"blank", "   ", 0, false},
		{"seconds", "30", 30 * time.Second, true},
		{"zero", "0", 0, true},
		{"spaces", " 120 ", 2 * time.Minute, true},
		{"at max", "3600", time.Hour, true},
		{"above max", "86400", upstream.MaxRetryAfter, true},
		{"int64 overflow", "99999999999999999999999", upstream.MaxRetryAfter, true},
		{"negative", "-5", 0, false},
		{"fraction", "1.5", 0, false},
		{"plus sign", "+5", 0, false},
		{"unit", "5s", 0, false},
		{"garbage", "soon", 0, false},
		{"imf date", "Tue, 04 Mar 2025 12:00:45 GMT", 45 * time.Second, true},
		{"rfc850 date", "Tuesday, 04-Mar-25 12:01:00 GMT", time.Minute, true},
		{"asctime date", "Tue Mar  4 12:00:10 2025", 10 * time.Second, true},
		{"past date", "Tue, 04 Mar 2025 11:59:00 GMT", 0, true},
		{"far date", "Wed, 05 Mar 2025 12:00:00 GMT", upstream.MaxRetryAfter, true},
		{"bad date", "Tue, 32 Mar 2025 12:00:00 GMT", 0, false},
	}
	for _, tt := range tests {
		got, ok := upstream.ParseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.name, tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

// FuzzParseRetryAfter: whatever the header holds, the result is within
// [0, MaxRetryAfter] and zero when rejected.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "30", "-5", "99999999999999999999", "Tue, 04 Mar 2025 12:00:45 GMT", "soon"} {
		f.Add(s)
	}
	now := time.Date(2025, time.March, 4, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := upstream.ParseRetryAfter(s, now)
		if d < 0 || d > upstream.MaxRetryAfter || (!ok && d != 0) {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v", s, d, ok)
		}
	})
}

func TestErrorMessages(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&upstream.CloseError{Code: 1008, Reason: "policy violation"}, `upstream closed with 1008 "policy violation"`},
		{&upstream.CloseError{Code: 1006}, `upstream closed with 1006`},
		{&upstream.CloseError{Code: 1011, Reason: "bad\nline"}, `upstream closed with 1011 "bad\nline"`},
		{&upstream.StatusError{Status: 401}, `upstream answered HTTP 401`},
		{&upstream.StatusError{Status: 503, Reason: "Service Unavailable", RetryAfter: 30 * time.Second},
			`upstream answered HTTP 503 "Service Unavailable" (retry after 30s)`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

// TestErrorsThroughWrapping: callers find the typed errors and sentinels
// after the client wraps them with context.
func TestErrorsThroughWrapping(t *testing.T) {
	err := fmt.Errorf("dial upstream: %w", &upstream.StatusError{Status: 429, RetryAfter: time.Second})
	var se *upstream.StatusError
	if !errors.As(err, &se) || se.Status != 429 || se.RetryAfter != time.Second {
		t.Errorf("errors.As StatusError through wrap: %v", se)
	}
	err = fmt.Errorf("read: %w", &upstream.CloseError{Code: 1012, Reason: "restart"})
	var ce *upstream.CloseError
	if !errors.As(err, &ce) || ce.Code != 1012 {
		t.Errorf("errors.As CloseError through wrap: %v", ce)
	}
	err = fmt.Errorf("%w (HTTP %d)", upstream.ErrAuthFailed, 401)
	if !errors.Is(err, upstream.ErrAuthFailed) || errors.Is(err, upstream.ErrPermanent) {
		t.Errorf("errors.Is on wrapped sentinel: %v", err)
	}
	sentinels := []error{upstream.ErrAuthFailed, upstream.ErrGaveUp, upstream.ErrClosed, upstream.ErrHeartbeatTimeout, upstream.ErrPermanent}
	for i, a := range sentinels {
		for j, b := range sentinels {
			if (i == j) != errors.Is(a, b) {
				t.Errorf("errors.Is(%v, %v) = %v", a, b, errors.Is(a, b))
			}
		}
	}
}
