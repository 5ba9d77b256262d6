package template

import "testing"

func BenchmarkRenderResume(b *testing.B) {
	var m ResumeMessage
	if err := m.UnmarshalText([]byte(`{"t":"resume","session":{{json .Session}},"after":{{.LastSeq}}}`)); err != nil {
		b.Fatal(err)
	}
	d := Resume{Session: "8f14e45fceea167a", LastSeq: 41}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Render(d); err != nil {
			b.Fatal(err)
		}
	}
}
