package ssetest

import (
	"reflect"
	"strconv"
	"testing"
)

func TestHistory(t *testing.T) {
	h := history{max: 3}
	for range 5 {
		h.add(func(id uint64) []byte { return []byte(strconv.FormatUint(id, 10)) })
	}
	cases := []struct {
		after    uint64
		want     []string
		from, to uint64
	}{
		{0, []string{"3", "4", "5"}, 1, 2},
		{1, []string{"3", "4", "5"}, 2, 2},
		{2, []string{"3", "4", "5"}, 0, 0},
		{4, []string{"5"}, 0, 0},
		{5, nil, 0, 0},
		{9, nil, 0, 0},
	}
	for _, tc := range cases {
		events, from, to := h.after(tc.after)
		var got []string
		for _, e := range events {
			got = append(got, string(e))
		}
		if !reflect.DeepEqual(got, tc.want) || from != tc.from || to != tc.to {
			t.Errorf("after(%d) = %v, gap %d-%d; want %v, gap %d-%d", tc.after, got, from, to, tc.want, tc.from, tc.to)
		}
	}
	if len(h.events) != 3 || h.oldest() != 3 {
		t.Errorf("kept %d events from %d, want 3 from 3", len(h.events), h.oldest())
	}
}

func TestSplitLines(t *testing.T) {
	for in, want := range map[string][]string{
		"":         {""},
		"a":        {"a"},
		"a\nb":     {"a", "b"},
		"a\r\nb":   {"a", "b"},
		"a\rb":     {"a", "b"},
		"a\n\rb":   {"a", "", "b"},
		"a\n":      {"a", ""},
		"\r\n\r\n": {"", "", ""},
	} {
		if got := splitLines(in); !reflect.DeepEqual(got, want) {
			t.Errorf("splitLines(%q) = %q, want %q", in, got, want)
		}
	}
}
