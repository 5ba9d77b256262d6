package transport

import "fmt"

// BinaryPolicy is what a tcp:// app gets for a binary upstream message
// (TETHER_TCP_BINARY). A line holds text, and raw bytes could hold a newline
// that would split one message into two lines, so a binary message is never
// written as is.
type BinaryPolicy int

const (
	// BinaryBase64 writes the message as one line of standard base64 (RFC
	// 4648 §4, padded). The default: nothing is lost, and an app that
	// expects binary messages can decode them.
	BinaryBase64 BinaryPolicy = iota
	// BinaryDrop does not deliver the message; each drop is counted
	// (tether_app_dropped_total{reason="binary"}) and logged.
	BinaryDrop
	// BinaryClose closes the app, as an app that cannot take binary data
	// would close a WebSocket with 1003.
	BinaryClose
)

var binaryPolicyNames = [...]string{"base64", "drop", "close"}

// String returns base64, drop or close.
func (p BinaryPolicy) String() string {
	if p < 0 || int(p) >= len(binaryPolicyNames) {
		return fmt.Sprintf("BinaryPolicy(%d)", int(p))
	}
	return binaryPolicyNames[p]
}

// ParseBinaryPolicy parses base64, drop or close.
func ParseBinaryPolicy(s string) (BinaryPolicy, error) {
	for p, name := range binaryPolicyNames {
		if s == name {
			return BinaryPolicy(p), nil
		}
	}
	return 0, fmt.Errorf("invalid binary policy %q: want base64, drop or close", s)
}

// UnmarshalText lets configuration decoders (caarlos0/env) parse a BinaryPolicy.
func (p *BinaryPolicy) UnmarshalText(b []byte) error {
	v, err := ParseBinaryPolicy(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// NewlinePolicy is what a tcp:// app gets for an upstream text message that
// contains a line break (CR or LF), which written as is would reach the app
// as several lines (TETHER_TCP_NEWLINE).
type NewlinePolicy int

const (
	// NewlineSpace replaces every CR and LF by a space and delivers the
	// message as one line. The default: JSON cannot hold a raw CR or LF
	// inside a string, only between tokens where any whitespace is
	// equivalent, so a JSON parser sees the same value. Other text is
	// altered.
	NewlineSpace NewlinePolicy = iota
	// NewlineDrop does not deliver the message; each drop is counted
	// (tether_app_dropped_total{reason="newline"}) and logged.
	NewlineDrop
	// NewlineClose closes the app.
	NewlineClose
)

var newlinePolicyNames = [...]string{"space", "drop", "close"}

// String returns space, drop or close.
func (p NewlinePolicy) String() string {
	if p < 0 || int(p) >= len(newlinePolicyNames) {
		return fmt.Sprintf("NewlinePolicy(%d)", int(p))
	}
	return newlinePolicyNames[p]
}

// ParseNewlinePolicy parses space, drop or close.
func ParseNewlinePolicy(s string) (NewlinePolicy, error) {
	for p, name := range newlinePolicyNames {
		if s == name {
			return NewlinePolicy(p), nil
		}
	}
	return 0, fmt.Errorf("invalid newline policy %q: want space, drop or close", s)
}

// UnmarshalText lets configuration decoders (caarlos0/env) parse a NewlinePolicy.
func (p *NewlinePolicy) UnmarshalText(b []byte) error {
	v, err := ParseNewlinePolicy(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}
