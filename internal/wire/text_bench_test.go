package wire

import (
	"testing"
	"time"
)

// BenchmarkParse reads the texts a listener meets most: a body alone, and
// a delayed, traced, claim-checked one.
func BenchmarkParse(b *testing.B) {
	meta, err := NewMeta(map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
	if err != nil {
		b.Fatal(err)
	}
	for name, text := range map[string]string{
		"body":             `{"id":42,"name":"a job"}`,
		"due+meta+pointer": (&Text{Due: &DueLine{At: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}, Meta: meta, Pointer: aPointer}).Render(),
		"meta+body":        (&Text{Meta: meta, Body: `{"id":42}`}).Render(),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(text, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
