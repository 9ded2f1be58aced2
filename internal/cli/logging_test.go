package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLogFormat: --log-format json writes one JSON object per record, text writes
// key=value records, and auto (the default) picks JSON when stderr is not a terminal.
func TestLogFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		format string
		json   bool
	}{{"json", true}, {"text", false}, {"auto", true}} {
		t.Run(tc.format, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			var stdout, stderr syncBuffer
			exit := make(chan int, 1)
			db := "sqlite://" + filepath.Join(t.TempDir(), "gantry.db")
			go func() {
				exit <- Run(ctx, []string{"server", "--addr", "127.0.0.1:0", "--db", db, "--log-format", tc.format}, strings.NewReader(""), &stdout, &stderr)
			}()
			deadline := time.Now().Add(20 * time.Second)
			for listening.FindStringSubmatch(stderr.String()) == nil {
				if time.Now().After(deadline) {
					t.Fatalf("no listening record:\n%s", stderr.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			<-exit
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			for _, l := range lines {
				var rec map[string]any
				err := json.Unmarshal([]byte(l), &rec)
				if tc.json && (err != nil || rec["msg"] == nil || rec["level"] == nil) {
					t.Errorf("not a JSON record: %q (%v)", l, err)
				}
				if !tc.json && (err == nil || !strings.Contains(l, "msg=")) {
					t.Errorf("not a text record: %q", l)
				}
			}
		})
	}
	if r := runCLI(t, invocation{args: []string{"server", "--log-format", "xml"}}); r.code != exitUsage {
		t.Errorf("--log-format xml: exit %d, want %d", r.code, exitUsage)
	}
}
