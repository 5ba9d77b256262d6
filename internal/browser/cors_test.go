package browser

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestPreflight: a preflight for a GET is told the origin, the method, the
// headers it asked for and Private Network Access when asked; anything else
// is not a preflight.
func TestPreflight(t *testing.T) {
	r := httptest.NewRequest(http.MethodOptions, "/events", nil)
	r.Header.Set("Origin", "https://app.example")
	r.Header.Set("Access-Control-Request-Method", "GET")
	r.Header.Set("Access-Control-Request-Headers", "last-event-id")
	r.Header.Set("Access-Control-Request-Private-Network", "true")
	if !IsPreflight(r) {
		t.Fatal("IsPreflight = false for an OPTIONS with Origin and Request-Method GET")
	}
	w := httptest.NewRecorder()
	Preflight(w, r)
	h := w.Result().Header
	for k, want := range map[string]string{
		"Access-Control-Allow-Origin":          "https://app.example",
		"Access-Control-Allow-Credentials":     "true",
		"Access-Control-Allow-Methods":         "GET",
		"Access-Control-Allow-Headers":         "last-event-id",
		"Access-Control-Allow-Private-Network": "true",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if w.Code != http.StatusNoContent {
		t.Errorf("status %d, want 204", w.Code)
	}
	for _, tc := range []struct{ name, method, origin, asked string }{
		{"a GET", http.MethodGet, "https://app.example", "GET"},
		{"no Origin", http.MethodOptions, "", "GET"},
		{"for a POST", http.MethodOptions, "https://app.example", "POST"},
	} {
		r := httptest.NewRequest(tc.method, "/events", nil)
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		r.Header.Set("Access-Control-Request-Method", tc.asked)
		if IsPreflight(r) {
			t.Errorf("%s: IsPreflight = true", tc.name)
		}
	}
}
