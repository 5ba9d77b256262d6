package protocol

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tetherproxy/tether/internal/rules"
)

// The one-pass reader finds what a lookup per path finds, first occurrence
// of a repeated key included, whether it scans the top level or falls back
// to gjson.
func TestFieldReaderMatchesLookups(t *testing.T) {
	msgs := []string{
		`{"seq":7,"channel":"a","session":"S","snap":9}`,
		`{"channel":"b","data":{"seq":1,"channel":"x"},"seq":8}`,
		`{"seq":1,"seq":2,"channel":"first","channel":"second"}`,
		`{"s\u0065q":12,"ch\u0061nnel":"esc"}`,
		`{"nested":[1,{"seq":3}],"other":"seq"}`,
		`  {"seq":-9223372036854775808}`,
		`{"seq":"7","channel":7}`,
		`{"channel":"a\"b\\","session":"\u00e9t\u00e9","seq":1.5e3}`,
		`{"p":"x\\\"}]","seq":true,"channel":null,"session":false}`,
		`{"p":[")(","{"],"q":{"a":[{}]},"seq":0}`,
		` { "seq" : 5 , "channel" : "c" } `,
		"{\"seq\":5}\n",
		`[{"seq":1}]`,
		`"seq"`,
		`{}`,
		``,
	}
	sets := [][]string{
		{"seq", "channel", "session", "snap"},
		{"seq", "", "", ""},
		{"data.seq", "data.channel", "session", "seq"},
		{"seq", "channel", "", "seq"},
	}
	for _, set := range sets {
		r := newFieldReader(optPath(t, set[0]), optPath(t, set[1]), optPath(t, set[2]), optPath(t, set[3]))
		wantFlat := !slices.Contains(set, "data.seq")
		if r.flat != wantFlat {
			t.Errorf("paths %q: flat = %v, want %v", set, r.flat, wantFlat)
		}
		for _, msg := range msgs {
			got := readFields(&r, []byte(msg))
			for i, p := range set {
				var want fieldValue
				if p != "" {
					want = valueOf(gjson.Get(msg, p))
				}
				if got[i] != want {
					t.Errorf("paths %q, message %s: field %d (%q) = %+v, want %+v", set, msg, i, p, got[i], want)
				}
			}
		}
	}
}

// The scan understands the messages a server sends, and leaves to gjson
// only what it cannot read exactly as gjson does.
func TestTopScanUnderstands(t *testing.T) {
	keys := []string{"seq", "channel"}
	tests := []struct {
		msg  string
		want bool
	}{
		{`{"t":"event","seq":1,"channel":"a","data":{"px":[1.5,"x"]}}`, true},
		{`{"data":{"px":[1.5,"x"]},"seq":1}`, true},
		{`{"seq":1,"channel":"a\u00e9"}`, true}, // escaped value: unescaped by gjson
		{`{"a":"x"}` + "\n", true},              // neither key: all read
		{`{}`, true},                            // neither key
		{`{"s\u0065q":1}`, false},               // escaped key
		{`{"seq":01}`, false},                   // not a JSON number
		{`{"seq":+1}`, false},                   // not a JSON number
		{`{"seq":1x,"channel":"a"}`, false},     // gjson reads "1x"
		{`{"seq":tru,"channel":"a"}`, false},    // not a literal
		{`{"a":1 "seq":2}`, false},              // no comma: gjson reads on
		{`{"a":1} "seq":2`, false},              // gjson reads past the object
		{`{"a":"unterminated}`, false},          // unterminated string
		{`{"a":[1,2}`, false},                   // never closed
		{"{\"a\":1,\x01\"seq\":2}", false},      // a blank only gjson skips
		{`[1]`, false},                          // not an object
	}
	scan := newTopScan(keys)
	for _, tc := range tests {
		out := make([]fieldValue, len(keys))
		if got := scan.scan(tc.msg, out); got != tc.want {
			t.Errorf("scan(%s) understood = %v, want %v", tc.msg, got, tc.want)
		}
	}
}

func TestSeqNumber(t *testing.T) {
	tests := []struct {
		msg  string
		want int64
		ok   bool
	}{
		{`{"seq":42}`, 42, true},
		{`{"seq":-7}`, -7, true},
		{`{"seq":-0}`, 0, true},
		{`{"seq":999999999999999999}`, 999999999999999999, true},
		{`{"seq":9223372036854775807}`, 9223372036854775807, true},
		{`{"seq":-9223372036854775808}`, -9223372036854775808, true},
		{`{"seq":9223372036854775808}`, 0, false},
		{`{"seq":42.0}`, 42, true},
		{`{"seq":4.2e1}`, 42, true},
		{`{"seq":9007199254740993}`, 9007199254740993, true},
		{`{"seq":42.5}`, 0, false},
		{`{"seq":1e19}`, 0, false},
		{`{"seq":"42"}`, 42, true},
		{`{"seq":"-7"}`, -7, true},
		{`{"seq":"9223372036854775807"}`, 9223372036854775807, true},
		{`{"seq":"9223372036854775808"}`, 0, false},
		{`{"seq":"+42"}`, 0, false},
		{`{"seq":" 42"}`, 0, false},
		{`{"seq":"4.2e1"}`, 0, false},
		{`{"seq":""}`, 0, false},
		{`{"seq":"-"}`, 0, false},
		{`{"seq":"4\u0032"}`, 42, true},
		{`{"seq":null}`, 0, false},
		{`{}`, 0, false},
	}
	p := path(t, "seq")
	r := newFieldReader(p, rules.Path{}, rules.Path{}, rules.Path{})
	for _, tc := range tests {
		f := readFields(&r, []byte(tc.msg))
		got, ok := seqNumber(&f[fieldSeq], p, []byte(tc.msg))
		if got != tc.want || ok != tc.ok {
			t.Errorf("seqNumber(%s) = %d, %v, want %d, %v", tc.msg, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzFieldReader holds the scan to gjson: whenever it understands a
// message, every key it reports (or reports absent) is what gjson's walk
// of the top level finds, and so are the sequence numbers read from them.
// key is a wanted key of the fuzzer's choosing, asked for twice, beside
// fixed ones. Valid JSON is also checked against a gjson lookup per path.
func FuzzFieldReader(f *testing.F) {
	f.Add(`{"seq":1,"channel":"a"}`, "seq")
	f.Add(`{"a":{"seq":2},"seq":3,"seq":4}`, "a")
	f.Add(`{"ch\u0061nnel":"x","session":null}`, "channel")
	f.Add(`{"k":"a\\\"b","seq":-12.5e+3}`, "k")
	f.Add(`{"k":[")",{"(":"]"}],"seq":true}`, "k")
	f.Add(`[1,2]`, "seq")
	// Past the first 16 bytes of a string its backslashes are looked for
	// only by a caller that wants it: a long key, a long wanted value.
	f.Add(`{"key_longer_than_16":"an escape past 16 bytes: \"q\" \\","seq":1}`, "key_longer_than_16")
	f.Add(`{"0123456789abcdefg\u0073eq":1,"seq":2}`, "0123456789abcdefgseq")
	keys := []string{"seq", "channel", "session", "snapshot"}
	r := newFieldReader(path(f, "seq"), path(f, "channel"), path(f, "session"), path(f, "snapshot"))
	f.Fuzz(func(t *testing.T, msg, key string) {
		wanted := []string{key, "seq", "", "channel", key}
		scan := newTopScan(wanted)
		got := make([]fieldValue, len(wanted))
		if scan.scan(msg, got) {
			want := walkReference(msg, wanted)
			for i := range wanted {
				if got[i] != want[i] {
					t.Fatalf("%q, key %q: slot %d = %+v, gjson %+v", msg, wanted[i], i, got[i], want[i])
				}
			}
			checkSeqNumber(t, msg, &got[1], want[1])
		}
		if !json.Valid([]byte(msg)) {
			return
		}
		all := readFields(&r, []byte(msg))
		for i, k := range keys {
			if want := valueOf(gjson.Get(msg, k)); all[i] != want {
				t.Fatalf("%s: %s = %+v, want %+v", msg, k, all[i], want)
			}
		}
	})
}

// walkReference is what the reader did before topScan: gjson's walk of the
// top level, first occurrence of each key.
func walkReference(msg string, keys []string) []fieldValue {
	out := make([]fieldValue, len(keys))
	gjson.Parse(msg).ForEach(func(k, v gjson.Result) bool {
		for i, want := range keys {
			if want != "" && want == k.Str && !out[i].ok {
				out[i] = valueOf(v)
			}
		}
		return true
	})
	return out
}

// checkSeqNumber compares seqNumber's fast path with strconv on the same
// value, as the reader read numbers before.
func checkSeqNumber(t *testing.T, msg string, got *fieldValue, want fieldValue) {
	t.Helper()
	if want.kind != gjson.Number {
		return
	}
	p := path(t, "seq")
	n, ok := seqNumber(got, p, []byte(msg))
	wn, err := strconv.ParseInt(want.raw, 10, 64)
	wok := err == nil
	if !wok {
		wn, wok = p.Int([]byte(msg))
	}
	if n != wn || ok != wok {
		t.Fatalf("%q: seqNumber = %d, %v, want %d, %v", msg, n, ok, wn, wok)
	}
}

// FuzzParseInt holds parseInt to strconv: whatever it accepts, strconv
// reads the same; and it accepts every optional minus and 1 to 18 digits.
func FuzzParseInt(f *testing.F) {
	for _, s := range []string{"0", "-0", "42", "-7", "1000000000000042", "999999999999999999",
		"12345678", "1234567/", "1234567:", "/1234567", "00000000", "-", "", "1e5", "+5", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := parseInt(s)
		want, err := strconv.ParseInt(s, 10, 64)
		if ok && (err != nil || n != want) {
			t.Fatalf("parseInt(%q) = %d, strconv: %d, %v", s, n, want, err)
		}
		d := strings.TrimPrefix(s, "-")
		plain := len(d) > 0 && len(d) <= 18 && strings.Trim(d, "0123456789") == ""
		if plain != ok {
			t.Fatalf("parseInt(%q) accepted %v, want %v", s, ok, plain)
		}
	})
}

// readFields is what r reads in data, field by field.
func readFields(r *fieldReader, data []byte) [numFields]fieldValue {
	var v ruleValues
	r.read(data, &v.vals)
	var out [numFields]fieldValue
	for i, a := range r.at {
		out[i] = *valueAt(&v.vals, a)
	}
	return out
}

func optPath(t *testing.T, p string) (r rules.Path) {
	if p == "" {
		return r
	}
	return path(t, p)
}

// BenchmarkFieldReader reads the sequence number of a feed event: 64 bytes,
// 1 KiB with the number first, and 1 KiB with it after the payload, by the
// scan and by the gjson walk it replaces.
func BenchmarkFieldReader(b *testing.B) {
	pad := strings.Repeat("x", 900)
	msgs := []struct{ name, msg string }{
		{"64B", `{"t":"event","seq":1000000000000042,"p":"xxxxxxxxxxxxxxxxxxxxx"}`},
		{"1KiB-seq-first", `{"t":"event","seq":1000000000000042,"channel":"a","data":{"px":"` + pad + `"}}`},
		{"1KiB-seq-last", `{"t":"event","channel":"a","data":{"px":"` + pad + `"},"seq":1000000000000042}`},
	}
	p := path(b, "seq")
	r := newFieldReader(p, rules.Path{}, rules.Path{}, rules.Path{})
	for _, m := range msgs {
		data := []byte(m.msg)
		b.Run("scan/"+m.name, func(b *testing.B) {
			b.ReportAllocs()
			var v ruleValues
			for b.Loop() {
				r.read(data, &v.vals)
				if _, ok := seqNumber(valueAt(&v.vals, r.at[fieldSeq]), p, data); !ok {
					b.Fatal("no number")
				}
			}
		})
		b.Run("gjson-walk/"+m.name, func(b *testing.B) {
			b.ReportAllocs()
			var v ruleValues
			for b.Loop() {
				r.walk(m.msg, &v.vals)
				if _, err := strconv.ParseInt(valueAt(&v.vals, r.at[fieldSeq]).raw, 10, 64); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
