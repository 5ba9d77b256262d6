package proxy

import "testing"

// statusURL keeps where a session dials and drops what may carry
// credentials: userinfo, query and fragment.
func TestStatusURL(t *testing.T) {
	tests := map[string]string{
		"wss://feed.example.com/v1":                         "wss://feed.example.com/v1",
		"wss://user:pass@feed.example.com/v1?token=abc#top": "wss://feed.example.com/v1",
		"wss://TOKEN@feed.example.com":                      "wss://feed.example.com",
		"ws://127.0.0.1:8080/a%2Fb?x=1":                     "ws://127.0.0.1:8080/a%2Fb",
		"https://[::1]:9443/events?api_key=k":               "https://[::1]:9443/events",
		"ws://bad host/":                                    "",
	}
	for raw, want := range tests {
		if got := statusURL(raw); got != want {
			t.Errorf("statusURL(%q) = %q, want %q", raw, got, want)
		}
	}
}
