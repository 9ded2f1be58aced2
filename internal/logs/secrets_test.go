package logs

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

const testSecret = "s3cr3t/value+with?odd&chars="

// secretTexts are lines that each carry a form of testSecret.
func secretTexts() []string {
	return []string{
		"plain " + testSecret + " end",
		"std " + base64.StdEncoding.EncodeToString([]byte(testSecret)),
		"raw " + base64.RawStdEncoding.EncodeToString([]byte(testSecret)) + "!",
		"url " + base64.URLEncoding.EncodeToString([]byte(testSecret)),
		"rawurl " + base64.RawURLEncoding.EncodeToString([]byte(testSecret)) + ".",
		"query ?k=" + url.QueryEscape(testSecret),
		"path /" + url.PathEscape(testSecret) + "/x",
	}
}

func assertMasked(t *testing.T, lines []Line, values ...string) {
	t.Helper()
	for _, l := range lines {
		for _, v := range values {
			for _, f := range literalForms(v) {
				if strings.Contains(l.Text, f) {
					t.Errorf("line %q holds a form of a secret (%q)", l.Text, f)
				}
			}
		}
		if !strings.Contains(l.Text, maskText) {
			t.Errorf("line %q masks nothing", l.Text)
		}
	}
}

func TestRecorderMasksSecretForms(t *testing.T) {
	t.Parallel()
	r, b := setupRecorder(t, 1<<16)
	r.MaskSecret(testSecret)
	multi := "-----BEGIN KEY-----\nAAAAline2secret\nBBBBline3secret\n-----END KEY-----"
	r.MaskSecret(multi)
	w := r.Writer(Stdout)
	for _, s := range secretTexts() {
		write(t, w, s+"\n")
	}
	for _, l := range strings.Split(multi, "\n") {
		write(t, w, "> "+l+"\n")
	}
	// ::add-mask:: keeps working beside delivered secrets.
	write(t, w, "::add-mask::runtime-token-123\n")
	write(t, w, "got runtime-token-123\n")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b.sink.mu.Lock()
	defer b.sink.mu.Unlock()
	assertMasked(t, b.sink.lines, testSecret, "runtime-token-123")
	for _, l := range b.sink.lines {
		for _, piece := range strings.Split(multi, "\n") {
			if strings.Contains(l.Text, piece) {
				t.Errorf("line %q holds a line of a multi-line secret", l.Text)
			}
		}
	}
	if n := len(b.sink.lines); n != len(secretTexts())+4+1 {
		t.Errorf("%d lines, want %d", n, len(secretTexts())+5)
	}
}

// TestRecorderHoldsSecret: HoldsSecret says whether a text holds a registered secret in
// any form the log masks, and agrees with the log: it holds one exactly when the text
// would not be emitted as it is.
func TestRecorderHoldsSecret(t *testing.T) {
	t.Parallel()
	r, b := setupRecorder(t, 1<<16)
	r.MaskSecret(testSecret)
	r.MaskSecret("-----BEGIN KEY-----\nAAAAline2secret\n-----END KEY-----")
	r.MaskSecret("ab") // too short to mask, so too short to count
	w := r.Writer(Stdout)
	write(t, w, "::add-mask::runtime-token-123\n")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, text string
		want       bool
	}{
		{"unrelated", "version 1.2.3", false},
		{"empty", "", false},
		{"too short", "ab", false},
		{"too short inside", "x ab y", false},
		{"a line of a multi-line secret", "key AAAAline2secret", true},
		{"registered by a step", "runtime-token-123", true},
		{"on a later line", "first\nthen runtime-token-123\nlast", true},
		{"a part of a secret", testSecret[:len(testSecret)-1], false},
	}
	for i, text := range secretTexts() {
		tests = append(tests, struct {
			name, text string
			want       bool
		}{fmt.Sprintf("form %d", i), text, true})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.HoldsSecret(tc.text); got != tc.want {
				t.Errorf("HoldsSecret(%q) = %t, want %t", tc.text, got, tc.want)
			}
			b.sink.mu.Lock()
			before := len(b.sink.lines)
			b.sink.mu.Unlock()
			r.System(tc.text)
			b.sink.mu.Lock()
			var emitted []string
			for _, l := range b.sink.lines[before:] {
				emitted = append(emitted, l.Text)
			}
			b.sink.mu.Unlock()
			if masked := strings.Join(emitted, "\n") != tc.text; masked != tc.want {
				t.Errorf("the log emits %q as %q: masked %t, HoldsSecret %t", tc.text, emitted, masked, tc.want)
			}
		})
	}
}

func TestServiceMasksSecrets(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	lines := func() []Line {
		var out []Line
		for i, s := range secretTexts() {
			out = append(out, Line{Seq: int64(i + 1), TS: 1, Stream: Stdout, Text: s})
		}
		return out
	}
	t.Run("remembered", func(t *testing.T) {
		st := openTestFiles(t)
		svc := NewService(Config{Storage: st})
		defer svc.Close()
		k := Key{Job: uuid.New(), Attempt: 1}
		svc.RememberSecrets(k, []string{testSecret})
		if _, _, err := svc.Append(ctx, k, lines()); err != nil {
			t.Fatal(err)
		}
		got, err := svc.Read(ctx, k, 0, 100)
		if err != nil || len(got) != len(secretTexts()) {
			t.Fatalf("Read = %d lines, %v", len(got), err)
		}
		assertMasked(t, got, testSecret)
	})
	t.Run("resolved on demand", func(t *testing.T) {
		st := openTestFiles(t)
		svc := NewService(Config{Storage: st})
		defer svc.Close()
		k := Key{Job: uuid.New(), Attempt: 2}
		calls := 0
		fail := true
		svc.UseSecrets(func(ctx context.Context, got Key) ([]string, error) {
			calls++
			if got != k {
				t.Errorf("resolved %v, want %v", got, k)
			}
			if fail {
				return nil, errors.New("store down")
			}
			return []string{testSecret}, nil
		})
		// A batch that cannot be masked is refused, not stored as it is.
		if _, _, err := svc.Append(ctx, k, lines()); err == nil {
			t.Fatal("Append stored a batch whose secrets could not be resolved")
		}
		fail = false
		if _, _, err := svc.Append(ctx, k, lines()); err != nil {
			t.Fatal(err)
		}
		more := []Line{{Seq: int64(len(secretTexts()) + 1), TS: 1, Stream: Stdout, Text: "again " + testSecret}}
		if _, _, err := svc.Append(ctx, k, more); err != nil {
			t.Fatal(err)
		}
		if calls != 2 {
			t.Errorf("resolved %d times, want 2 (once failing, then kept for the attempt)", calls)
		}
		// Values unused for a while are dropped from memory, and resolved again if needed.
		svc.forgetIdleSecrets(time.Now().Add(time.Minute))
		last := []Line{{Seq: int64(len(secretTexts()) + 2), TS: 1, Stream: Stdout, Text: "last " + testSecret}}
		if _, _, err := svc.Append(ctx, k, last); err != nil {
			t.Fatal(err)
		}
		if calls != 3 {
			t.Errorf("resolved %d times after the values were forgotten, want 3", calls)
		}
		got, err := svc.Read(ctx, k, 0, 100)
		if err != nil || len(got) != len(secretTexts())+2 {
			t.Fatalf("Read = %d lines, %v", len(got), err)
		}
		assertMasked(t, got, testSecret)
	})
}

func openTestFiles(t *testing.T) *FileStorage {
	t.Helper()
	fs, err := OpenFileStorage(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fs.Close() })
	return fs
}

// TestServiceMaskText: text of many lines is masked with the attempt's secrets, resolved
// when not remembered; a failure to resolve them is an error, not the text unmasked.
func TestServiceMaskText(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	svc := NewService(Config{Storage: openTestFiles(t)})
	defer svc.Close()
	remembered := Key{Job: uuid.New(), Attempt: 1}
	svc.RememberSecrets(remembered, []string{testSecret})
	text := "| a |\n" + strings.Join(secretTexts(), "\n") + "\n"
	got, err := svc.MaskText(ctx, remembered, text)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, testSecret) || !strings.HasPrefix(got, "| a |\n") || strings.Count(got, maskText) < len(secretTexts()) {
		t.Errorf("MaskText = %q", got)
	}
	fail := true
	svc.UseSecrets(func(context.Context, Key) ([]string, error) {
		if fail {
			return nil, errors.New("store down")
		}
		return []string{testSecret}, nil
	})
	other := Key{Job: uuid.New(), Attempt: 1}
	if got, err := svc.MaskText(ctx, other, "x "+testSecret); err == nil {
		t.Errorf("MaskText without the attempt's secrets = %q, want an error", got)
	}
	fail = false
	if got, err := svc.MaskText(ctx, other, "x "+testSecret); err != nil || got != "x "+maskText {
		t.Errorf("MaskText once resolved = %q, %v", got, err)
	}
}
