package template

import (
	"errors"
	"fmt"
	"net/url"
)

// Resume is the data of TETHER_RESUME_MESSAGE, rendered on every reconnect,
// once per known stream when TETHER_STREAM_PATH is set.
type Resume struct {
	Session string // captured at TETHER_SESSION_PATH; "" until captured
	LastSeq int64  // the last number delivered in Stream
	Stream  string // the stream's name; "" without TETHER_STREAM_PATH
}

// Gap is the data of TETHER_GAP_NOTICE and TETHER_GAPFILL_URL: the missing
// numbers From to To, inclusive, of Stream. For a stream whose numbering
// started over, Reset names why (epoch, restart): From is then the number
// after the last one delivered before and To the new number minus one, so
// From may exceed To. Reset is "" for a gap.
type Gap struct {
	Stream   string
	From, To int64
	Session  string
	Reset    string
}

// Snapshot is the data of TETHER_RESYNC_URL: the stream whose gap could not
// be filled, and the server's session.
type Snapshot struct {
	Stream  string
	Session string
}

// The samples templates are validated with at parse time. Non-empty
// strings and distinct numbers let a template that slices or compares them
// be exercised the way real data will.
var (
	sampleResume = Resume{Session: "session", LastSeq: 41, Stream: "stream"}
	sampleGap    = Gap{Stream: "stream", From: 42, To: 45, Session: "session"}
	sampleSnap   = Snapshot{Stream: "stream", Session: "session"}
)

// ResumeMessage is TETHER_RESUME_MESSAGE. The zero value is unset.
type ResumeMessage struct{ t *Template }

// UnmarshalText parses and validates the template; empty text leaves it
// unset.
func (m *ResumeMessage) UnmarshalText(text []byte) error {
	t, err := parseVar("resume message", text, sampleResume)
	m.t = t
	return err
}

// IsSet reports whether a template was configured.
func (m ResumeMessage) IsSet() bool { return m.t != nil }

// Render renders the message for d. It panics when the template is unset.
func (m ResumeMessage) Render(d Resume) ([]byte, error) { return m.t.Execute(d) }

// String returns the template's source text, "" when unset.
func (m ResumeMessage) String() string { return sourceOf(m.t) }

// GapNotice is TETHER_GAP_NOTICE, the message injected under the notify
// gap policy. The zero value is unset.
type GapNotice struct{ t *Template }

// UnmarshalText parses and validates the template; empty text leaves it
// unset.
func (n *GapNotice) UnmarshalText(text []byte) error {
	t, err := parseVar("gap notice", text, sampleGap)
	n.t = t
	return err
}

// IsSet reports whether a template was configured.
func (n GapNotice) IsSet() bool { return n.t != nil }

// Render renders the notice for d. It panics when the template is unset.
func (n GapNotice) Render(d Gap) ([]byte, error) { return n.t.Execute(d) }

// String returns the template's source text, "" when unset.
func (n GapNotice) String() string { return sourceOf(n.t) }

// GapFillURL is TETHER_GAPFILL_URL, the HTTP catch-up endpoint. The zero
// value is unset.
type GapFillURL struct{ t *Template }

// UnmarshalText parses and validates the template, which must render an
// absolute http or https URL for the sample data; empty text leaves it
// unset.
func (u *GapFillURL) UnmarshalText(text []byte) error {
	t, err := parseVar("gapfill url", text, sampleGap)
	if err == nil && t != nil {
		err = checkURL(t, sampleGap)
	}
	if err != nil {
		t = nil
	}
	u.t = t
	return err
}

// IsSet reports whether a template was configured.
func (u GapFillURL) IsSet() bool { return u.t != nil }

// Render renders the URL for d. It panics when the template is unset.
func (u GapFillURL) Render(d Gap) (string, error) {
	b, err := u.t.Execute(d)
	return string(b), err
}

// String returns the template's source text, "" when unset. It may hold
// credentials (a token in the query): do not log it.
func (u GapFillURL) String() string { return sourceOf(u.t) }

// parseVar parses the text of a configuration variable. The configuration
// loader prefixes errors with the variable's name, so what is reported here
// is what is wrong.
func parseVar(name string, text []byte, sample any) (*Template, error) {
	if len(text) == 0 {
		return nil, nil
	}
	return Parse(name, string(text), sample)
}

// ResyncURL is TETHER_RESYNC_URL, the HTTP snapshot of a stream fetched
// when a gap cannot be filled. The zero value is unset.
type ResyncURL struct{ t *Template }

// UnmarshalText parses and validates the template, which must render an
// absolute http or https URL for the sample data; empty text leaves it
// unset.
func (u *ResyncURL) UnmarshalText(text []byte) error {
	t, err := parseVar("resync url", text, sampleSnap)
	if err == nil && t != nil {
		err = checkURL(t, sampleSnap)
	}
	if err != nil {
		t = nil
	}
	u.t = t
	return err
}

// IsSet reports whether a template was configured.
func (u ResyncURL) IsSet() bool { return u.t != nil }

// Render renders the URL for d. It panics when the template is unset.
func (u ResyncURL) Render(d Snapshot) (string, error) {
	b, err := u.t.Execute(d)
	return string(b), err
}

// String returns the template's source text, "" when unset. It may hold
// credentials (a token in the query): do not log it.
func (u ResyncURL) String() string { return sourceOf(u.t) }

func checkURL(t *Template, sample any) error {
	raw, err := t.Execute(sample)
	if err != nil {
		return err
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		// *url.Error quotes the URL, which may carry a token: keep only
		// what is wrong with it.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("rendered URL does not parse: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("rendered URL has scheme %q: want http or https", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("rendered URL has no host")
	}
	return nil
}

func sourceOf(t *Template) string {
	if t == nil {
		return ""
	}
	return t.String()
}
