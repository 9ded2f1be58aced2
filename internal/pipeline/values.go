package pipeline

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/lazyre"
)

// Duration is a time.Duration that reads and writes as text such as "30m" in JSON.
type Duration time.Duration

// MarshalJSON writes the duration as Go duration text.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads Go duration text.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// String formats like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

var durationPart = lazyre.New(`^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)`)

// ParseDuration reads a duration such as "30m", "1h30m", "90s", "500ms", "7d" or "2w".
// Days and weeks are 24 and 168 hours. Negative durations are not accepted.
func ParseDuration(s string) (time.Duration, error) {
	rest := strings.TrimSpace(s)
	if rest == "" {
		return 0, fmt.Errorf("empty duration")
	}
	units := map[string]time.Duration{
		"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour,
		"d": 24 * time.Hour, "w": 7 * 24 * time.Hour,
	}
	var total float64
	for rest != "" {
		m := durationPart.FindStringSubmatch(rest)
		if m == nil {
			return 0, fmt.Errorf("%q is not a duration such as 30s, 10m, 1h30m or 7d", s)
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration: %w", s, err)
		}
		total += v * float64(units[m[2]])
		if total > float64(math.MaxInt64) {
			return 0, fmt.Errorf("%q is too long a duration", s)
		}
		rest = rest[len(m[0]):]
	}
	return time.Duration(total), nil
}

var sizePattern = lazyre.New(`^(\d+(?:\.\d+)?)\s*(Ki|Mi|Gi|Ti|Pi|k|K|M|G|T|P|B)?$`)

// ParseSize reads a byte size: a plain number of bytes, or a number with a binary suffix
// (Ki, Mi, Gi, Ti, Pi) or a decimal one (k, M, G, T, P), as in "4Gi" or "512M".
func ParseSize(s string) (int64, error) {
	m := sizePattern.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("%q is not a size such as 512Mi, 4Gi or 1G", s)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size: %w", s, err)
	}
	mult := map[string]float64{
		"": 1, "B": 1,
		"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50,
		"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
	}[m[2]]
	b := v * mult
	if b >= float64(math.MaxInt64) {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(b), nil
}

var cpuPattern = lazyre.New(`^(\d+(?:\.\d+)?)(m?)$`)

// ParseCPU reads a CPU amount as cores ("2", "0.5") or millicores ("500m") and returns
// millicores.
func ParseCPU(s string) (int64, error) {
	m := cpuPattern.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("%q is not a CPU amount such as 2, 0.5 or 500m", s)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a CPU amount: %w", s, err)
	}
	if m[2] == "" {
		v *= 1000
	}
	if v > 1<<20 {
		return 0, fmt.Errorf("%q is more CPU than any machine has", s)
	}
	return int64(math.Round(v)), nil
}

// formatBytes renders a size with a binary suffix, for messages.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	suffixes := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	v, i := float64(n)/unit, 0
	for v >= unit && i < len(suffixes)-1 {
		v /= unit
		i++
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + " " + suffixes[i]
}
