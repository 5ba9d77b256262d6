package rules

import "testing"

func TestParseDecimal(t *testing.T) {
	tests := []struct {
		raw    string
		want   decimal
		wantOK bool
	}{
		{"0", decimal{}, true},
		{"-0", decimal{}, true},
		{"0.000", decimal{}, true},
		{"0e12", decimal{}, true},
		{"1", decimal{exp: 1, digits: "1"}, true},
		{"-1", decimal{neg: true, exp: 1, digits: "1"}, true},
		{"100", decimal{exp: 3, digits: "1"}, true},
		{"1.50", decimal{exp: 1, digits: "1.5"}, true},
		{"10.05", decimal{exp: 2, digits: "10.05"}, true},
		{"0.001", decimal{exp: -2, digits: "1"}, true},
		{"0.0120", decimal{exp: -1, digits: "12"}, true},
		{"12e3", decimal{exp: 5, digits: "12"}, true},
		{"12E-3", decimal{exp: -1, digits: "12"}, true},
		{"1e+2", decimal{exp: 3, digits: "1"}, true},
		{"1e1099511627776", decimal{exp: 1099511627777, digits: "1"}, true},
		{"1e1099511627777", decimal{}, false},
		{"", decimal{}, false},
		{"-", decimal{}, false},
		{"+1", decimal{}, false},
		{"01", decimal{}, false},
		{"-01", decimal{}, false},
		{"1.", decimal{}, false},
		{".5", decimal{}, false},
		{"1e", decimal{}, false},
		{"1e+", decimal{}, false},
		{"1e1.5", decimal{}, false},
		{"1.2.3", decimal{}, false},
		{"0x10", decimal{}, false},
		{"NaN", decimal{}, false},
		{"Infinity", decimal{}, false},
		{"-Infinity", decimal{}, false},
		{" 1", decimal{}, false},
		{"1 ", decimal{}, false},
	}
	for _, tt := range tests {
		got, ok := parseDecimal(tt.raw)
		if ok != tt.wantOK || (ok && got != tt.want) {
			t.Errorf("parseDecimal(%q) = %+v, %v; want %+v, %v", tt.raw, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestDecimalEqual(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"1", "1.0", true},
		{"1", "1e0", true},
		{"10", "1e1", true},
		{"0.5", "5e-1", true},
		{"1.05", "105e-2", true},
		{"10.05", "1.005e1", true},
		{"0", "-0.0e-5", true},
		{"1.5", "1.05", false},
		{"15", "1.5", false},
		{"1", "-1", false},
		{"1", "10", false},
		{"12", "123", false},
		{"123", "12", false},
		{"9007199254740993", "9007199254740992", false},
	}
	for _, tt := range tests {
		a, okA := parseDecimal(tt.a)
		b, okB := parseDecimal(tt.b)
		if !okA || !okB {
			t.Fatalf("parseDecimal(%q, %q) failed", tt.a, tt.b)
		}
		if a.equal(b) != tt.want || b.equal(a) != tt.want {
			t.Errorf("%s == %s: got %v, want %v", tt.a, tt.b, a.equal(b), tt.want)
		}
	}
}
