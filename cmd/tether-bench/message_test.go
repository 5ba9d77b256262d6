package main

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestMessageRoundTrip(t *testing.T) {
	for _, size := range []int{minMessageSize, 64, 1 << 10, 16 << 10} {
		msg, err := newMessage(size)
		if err != nil {
			t.Fatalf("newMessage(%d): %v", size, err)
		}
		if len(msg) != size {
			t.Fatalf("newMessage(%d) is %d bytes", size, len(msg))
		}
		for _, tc := range []struct {
			seq uint64
			ts  int64
		}{{1, 1757000000000000000}, {123456789, 1999999999999999999}} {
			stamp(msg, tc.seq, tc.ts)
			seq, ts, err := parseMessage(msg)
			if err != nil || seq != tc.seq || ts != tc.ts {
				t.Fatalf("size %d: parse = %d, %d, %v; want %d, %d", size, seq, ts, err, tc.seq, tc.ts)
			}
			// The feed's messages are JSON, so tether's sequencing can read "seq".
			var v struct {
				Seq uint64 `json:"seq"`
			}
			if err := json.Unmarshal(msg, &v); err != nil || v.Seq != seqBase+tc.seq {
				t.Fatalf("size %d: not JSON with seq %d: %v (%s)", size, seqBase+tc.seq, err, msg)
			}
		}
	}
}

func TestMessageTooSmall(t *testing.T) {
	if _, err := newMessage(minMessageSize - 1); err == nil {
		t.Fatal("newMessage below the minimum size succeeded")
	}
}

func TestParseMalformed(t *testing.T) {
	good, _ := newMessage(64)
	stamp(good, 7, 1757000000000000000)
	corrupt := func(i int, c byte) []byte {
		b := append([]byte(nil), good...)
		b[i] = c
		return b
	}
	tests := map[string][]byte{
		"short":     good[:minMessageSize-1],
		"prefix":    corrupt(1, 'x'),
		"seq digit": corrupt(seqAt+3, 'a'),
		"ts digit":  corrupt(tsAt+3, '-'),
		"mid":       corrupt(tsAt-2, 'q'),
		"seq not >0": func() []byte {
			b := append([]byte(nil), good...)
			putDigits(b[seqAt:seqAt+seqDigits], seqBase)
			return b
		}(),
	}
	for name, msg := range tests {
		if _, _, err := parseMessage(msg); !errors.Is(err, errMalformed) {
			t.Errorf("%s: parse error %v, want errMalformed", name, err)
		}
	}
}

// The sink fails a run on the first message out of sequence.
func TestSinkSequence(t *testing.T) {
	msg := func(seq uint64) []byte {
		m, _ := newMessage(64)
		stamp(m, seq, nowNanos())
		return m
	}
	tests := []struct {
		name string
		seqs []uint64
		ok   bool
	}{
		{"in order", []uint64{1, 2, 3}, true},
		{"first is not 1", []uint64{2, 3}, false},
		{"gap", []uint64{1, 2, 4}, false},
		{"repeat", []uint64{1, 2, 2}, false},
		{"reordered", []uint64{1, 3, 2}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &sink{}
			var err error
			for _, seq := range tt.seqs {
				if err = s.message(msg(seq)); err != nil {
					break
				}
			}
			if (err == nil) != tt.ok {
				t.Fatalf("error %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
