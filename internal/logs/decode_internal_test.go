package logs

import (
	"bytes"
	"testing"
)

// TestLeadingSeq: a stored line's seq is read without decoding it, and anything that is
// not the shape encode writes is left to the full decoder.
func TestLeadingSeq(t *testing.T) {
	t.Parallel()
	enc := Encode([]Line{{Seq: 123456789, TS: 5, Stream: Stdout, Text: `{"seq":1}`}})
	if seq, ok := leadingSeq(enc); !ok || seq != 123456789 {
		t.Errorf("leadingSeq(%s) = %d, %v", enc, seq, ok)
	}
	for _, b := range []string{`{"ts":1,"seq":2}`, `{"seq":}`, `{"seq":12`, `{"seq":"3"}`, `{"seq":99999999999999999999}`, ``} {
		if seq, ok := leadingSeq([]byte(b)); ok {
			t.Errorf("leadingSeq(%s) = %d, true; want it left to the decoder", b, seq)
		}
	}
	// decode skips on it and still keeps what follows.
	data := Encode([]Line{{Seq: 1, Text: "a"}, {Seq: 2, Text: "b"}, {Seq: 3, Text: "c"}})
	got, err := Decode(bytes.NewReader(data), 1, 10, nil)
	if err != nil || len(got) != 2 || got[0].Text != "b" || got[1].Text != "c" {
		t.Errorf("decode after 1: %+v, %v", got, err)
	}
}
