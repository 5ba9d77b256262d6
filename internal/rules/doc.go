// Package rules compiles the message rules and paths of tether's
// configuration (TETHER_*_MATCH, TETHER_*_PATH, TETHER_SUBSCRIPTION_KEY) and
// evaluates them against whole WebSocket messages.
//
// # Patterns
//
// A pattern is either a JSON object or "re:" followed by a Go regular
// expression (RE2 syntax, package regexp) applied to the raw message bytes,
// for protocols that are not JSON. Both kinds apply to text and binary
// messages alike.
//
// A JSON pattern is a containment pattern: a message matches when it is a
// valid JSON object holding every field of the pattern with an equal value;
// other fields are ignored, so {} matches any object. Values are equal when:
//
//   - strings have the same unescaped bytes ("a\u0062" equals "ab");
//   - numbers have the same exact decimal value (1 equals 1.0 and 10e-1,
//     and 9007199254740993 does not equal 9007199254740992); a number whose
//     exponent exceeds ±2^40 only equals the same text;
//   - true, false and null equal only themselves;
//   - arrays have the same length and pairwise equal elements, in order;
//   - objects, at any depth and inside arrays too, are compared by
//     containment again: {"a":{"b":1}} matches {"a":{"b":1,"c":2}}.
//
// A message that repeats a key is judged by the key's first occurrence, as
// gjson.Get reads it; a pattern that repeats a key is rejected. A message
// that is not JSON (RFC 8259; like encoding/json, nesting deeper than 10000
// levels counts as invalid), or whose top level is not an object, never
// matches a JSON pattern.
//
// Matching walks the message's top-level object once and stops as soon as
// the answer is known; messages not starting with '{' are rejected at the
// first byte. Only a message that matches is then validated as a whole.
// Matching allocates nothing unless a key or string value it reads contains
// escapes (gjson unescapes it into a new string), or a pattern object has
// more than 64 fields. Nested values the pattern does not ask for are
// skipped, not read.
//
// # Paths
//
// Paths use gjson syntax ("seq", "data.seq", "params.0"); see [Path].
//
// # Concurrency
//
// A Matcher or Path is immutable once compiled and safe for concurrent use.
// Neither keeps a reference to the messages it reads.
package rules
