package logs

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// benchLog is about 64 KiB of the output a build prints: plain lines, coloured lines,
// commit hashes, a base64 blob, and a few lines holding a registered secret.
func benchLog(secret string) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	blob := make([]byte, 3000)
	for i := range blob {
		blob[i] = byte(rng.Uint32())
	}
	for i := 0; b.Len() < 64<<10; i++ {
		sha := make([]byte, 20)
		for j := range sha {
			sha[j] = byte(rng.Uint32())
		}
		switch i % 8 {
		case 0:
			fmt.Fprintf(&b, "\x1b[32m✓\x1b[0m ok  \tgithub.com/example/pkg%d\t0.%03ds\n", i, i%1000)
		case 1:
			fmt.Fprintf(&b, "commit %s Merge branch 'feature/%d' into main\n", hex.EncodeToString(sha), i)
		case 2:
			fmt.Fprintf(&b, "data: %s\n", base64.StdEncoding.EncodeToString(blob[i%100:i%100+300]))
		case 3:
			fmt.Fprintf(&b, "Step %d/12 : RUN go build -trimpath -o /out/app ./cmd/app (%d%%)\n", i%12, i%100)
		case 4:
			if i%64 == 4 {
				fmt.Fprintf(&b, "curl -H 'Authorization: Bearer %s' https://api.example.com/v1/items\n", secret)
				continue
			}
			fmt.Fprintf(&b, "npm WARN deprecated package-%d@1.0.%d: use something else\n", i, i%10)
		default:
			fmt.Fprintf(&b, "[%06d] INFO  request id=%d path=/api/v1/runs/%d status=200 took=%dms\n", i, i*7919, i, i%250)
		}
	}
	return []byte(b.String())
}

// BenchmarkRecorderMask measures a recorder writing a build log in 4 KiB writes with
// five delivered secrets registered, and with none.
func BenchmarkRecorderMask(b *testing.B) {
	secrets := []string{
		"ghp_16C7e42F292c6912E7710c838347Ae178B4a",
		"s3cr3t/value+with?odd&chars=",
		"p@ss \"quoted\" \\ back\nslash-ünïcode",
		"AKIAIOSFODNN7EXAMPLE",
		"hunter2hunter2",
	}
	log := benchLog(secrets[0])
	for _, n := range []int{0, len(secrets)} {
		b.Run(fmt.Sprintf("secrets=%d", n), func(b *testing.B) {
			r := NewRecorder(func([]Line) {}, RecorderOptions{})
			for _, s := range secrets[:n] {
				r.MaskSecret(s)
			}
			w := r.Writer(Stdout)
			b.SetBytes(int64(len(log)))
			b.ReportAllocs()
			for b.Loop() {
				for p := log; len(p) > 0; {
					k := min(len(p), 4<<10)
					if _, err := w.Write(p[:k]); err != nil {
						b.Fatal(err)
					}
					p = p[k:]
				}
			}
			_ = io.Closer(w).Close()
		})
	}
}
