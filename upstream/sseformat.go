package upstream

import (
	"fmt"
	"strings"

	"github.com/tetherproxy/tether/internal/sse"
)

// SSEFormat says what each event of an SSE upstream becomes
// (TETHER_SSE_FORMAT). Either way it is one text message.
type SSEFormat int

const (
	// SSEJSON: the JSON object {"id":"…","event":"…","data":"…"}, all three
	// members always present and strings: id is the stream's last event ID
	// when the event was dispatched ("" when none), event its type
	// ("message" unless the stream named another), data its data.
	SSEJSON SSEFormat = iota
	// SSEData: the event's data as it is; the type is dropped, and the id
	// is not in the message: Conn.EventID gives it beside it.
	SSEData
)

var sseFormatNames = [...]string{SSEJSON: "json", SSEData: "data"}

// String returns the name ParseSSEFormat accepts.
func (f SSEFormat) String() string {
	if f >= 0 && int(f) < len(sseFormatNames) {
		return sseFormatNames[f]
	}
	return fmt.Sprintf("SSEFormat(%d)", int(f))
}

// ParseSSEFormat parses "json" or "data", ignoring case and surrounding
// space.
func ParseSSEFormat(s string) (SSEFormat, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	for f, name := range sseFormatNames {
		if v == name {
			return SSEFormat(f), nil
		}
	}
	return 0, fmt.Errorf("unknown SSE format %q: want json or data", s)
}

// UnmarshalText implements encoding.TextUnmarshaler for configuration parsers.
func (f *SSEFormat) UnmarshalText(b []byte) error {
	v, err := ParseSSEFormat(string(b))
	if err != nil {
		return err
	}
	*f = v
	return nil
}

// appendMessage appends the message ev becomes in format f to b.
func (f SSEFormat) appendMessage(b []byte, ev sse.Event) []byte {
	if f == SSEData {
		return append(b, ev.Data...)
	}
	b = append(b, `{"id":`...)
	b = appendJSONString(b, ev.ID)
	b = append(b, `,"event":`...)
	b = appendJSONString(b, ev.Type)
	b = append(b, `,"data":`...)
	b = appendJSONString(b, ev.Data)
	return append(b, '}')
}

// plainJSON[c] is true for the bytes a JSON string holds as they are: every
// byte but the quote, the backslash and the C0 controls (RFC 8259 §7).
// Bytes of multi-byte UTF-8 sequences are plain too.
var plainJSON = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendJSONString appends s as a JSON string. s is valid UTF-8: the sse
// package decodes the stream as the Encoding standard does, replacing what
// is not. Unlike encoding/json it escapes neither HTML characters nor
// U+2028/U+2029, which JSON allows raw (a parser, not a browser's script
// tag, reads these messages), and it allocates nothing: a typical 200-byte
// event of JSON data takes a third of json.Marshal's time
// (BenchmarkSSEFormat).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		if plainJSON[s[i]] {
			continue
		}
		b = append(b, s[start:i]...)
		b = appendEscape(b, s[i])
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendEscape appends the escape of an ASCII byte that JSON must escape,
// with the two-character forms where JSON has them.
func appendEscape(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}
