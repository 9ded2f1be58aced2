package pipeline

import (
	"encoding/json"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"30m", 30 * time.Minute, false},
		{"1h30m", 90 * time.Minute, false},
		{"500ms", 500 * time.Millisecond, false},
		{"1.5h", 90 * time.Minute, false},
		{"7d", 7 * 24 * time.Hour, false},
		{"2w", 14 * 24 * time.Hour, false},
		{"0s", 0, false},
		{"", 0, true},
		{"30", 0, true},
		{"-5m", 0, true},
		{"5 m", 0, true},
		{"m", 0, true},
		{"99999999999999w", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"4Gi", 4 << 30, false},
		{"512Mi", 512 << 20, false},
		{"1G", 1e9, false},
		{"100", 100, false},
		{"1.5Ki", 1536, false},
		{"10k", 10000, false},
		{"4GB", 0, true},
		{"-1Mi", 0, true},
		{"lots", 0, true},
		{"99999999Pi", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseCPU(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"2", 2000, false},
		{"0.5", 500, false},
		{"250m", 250, false},
		{"1.5m", 2, false},
		{"two", 0, true},
		{"2 cores", 0, true},
		{"9999999", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseCPU(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseCPU(%q) = %v, %v; want %v, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(Duration(90 * time.Second))
	if err != nil || string(b) != `"1m30s"` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var d Duration
	if err := json.Unmarshal(b, &d); err != nil || d != Duration(90*time.Second) {
		t.Errorf("Unmarshal = %v, %v", d, err)
	}
	if err := json.Unmarshal([]byte(`"soon"`), &d); err == nil {
		t.Error("Unmarshal accepted a bad duration")
	}
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	r := RetryPolicy{Backoff: Duration(10 * time.Second), MaxBackoff: Duration(time.Minute)}
	want := map[int]time.Duration{2: 10 * time.Second, 3: 20 * time.Second, 4: 40 * time.Second, 5: time.Minute, 50: time.Minute}
	for attempt, d := range want {
		if got := r.Delay(attempt); got != d {
			t.Errorf("Delay(%d) = %v, want %v", attempt, got, d)
		}
	}
}

func TestSuggest(t *testing.T) {
	t.Parallel()
	known := []string{"runs_on", "needs", "steps", "timeout", "if"}
	tests := map[string]string{
		"runs-on":  `; did you mean "runs_on"?`,
		"runsOn":   `; did you mean "runs_on"?`,
		"neds":     `; did you mean "needs"?`,
		"Steps":    `; did you mean "steps"?`,
		"timeuot":  `; did you mean "timeout"?`,
		"of":       `; did you mean "if"?`,
		"services": "",
	}
	for in, want := range tests {
		if got := suggest(in, known); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}
