package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
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

// duplicateKey returns the first key that appears twice in one object of the JSON
// value, at any depth: encoding/json would keep the last and hide the other.
func duplicateKey(data []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var walk func() (string, error)
	walk = func() (string, error) {
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return "", err
				}
				key := k.(string)
				if seen[key] {
					return key, nil
				}
				seen[key] = true
				if dup, err := walk(); dup != "" || err != nil {
					return dup, err
				}
			}
			_, err = dec.Token()
			return "", err
		case json.Delim('['):
			for dec.More() {
				if dup, err := walk(); dup != "" || err != nil {
					return dup, err
				}
			}
			_, err = dec.Token()
			return "", err
		}
		return "", nil
	}
	return walk()
}

func TestDuplicateKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"worker":"docker","worker":"01a2"}`:         "worker",
		`{"a":1,"b":{"c":2,"c":3}}`:                   "c",
		`{"a":[{"x":1},{"x":2}],"b":{"x":1},"x":"y"}`: "",
	} {
		if got, err := duplicateKey([]byte(in)); got != want || err != nil {
			t.Errorf("duplicateKey(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestUpJSONLogsHaveNoDuplicateKeys: in gantry up's JSON log (with a Docker Engine,
// whose sweeper logs too), each worker's records name the worker once under worker (its
// registered id) and once under worker_name, and no record has a key twice.
func TestUpJSONLogsHaveNoDuplicateKeys(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- Run(ctx, []string{"up", "--addr", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "data"), "--workers", "2",
			"--docker", "on", "--log-format", "json"}, strings.NewReader(""), &stdout, &stderr)
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-exit }) }
	defer stop()
	registered := func() []string {
		var out []string
		for _, l := range strings.Split(stderr.String(), "\n") {
			if strings.Contains(l, `"msg":"worker registered"`) {
				out = append(out, l)
			}
		}
		return out
	}
	waitFor(t, "the two workers to register", 30*time.Second, func() bool { return len(registered()) == 2 })
	stop()
	names := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		dup, err := duplicateKey([]byte(l))
		if err != nil || dup != "" {
			t.Errorf("record with key %q twice (%v): %s", dup, err, l)
		}
	}
	for _, l := range registered() {
		var rec struct {
			Worker     string `json:"worker"`
			WorkerName string `json:"worker_name"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.Worker == "" || rec.WorkerName == "" {
			t.Errorf("registration record without both worker and worker_name: %s", l)
		}
		names[rec.WorkerName[strings.LastIndex(rec.WorkerName, "/")+1:]] = true
	}
	if want := fmt.Sprint(map[string]bool{"local-1": true, "local-2": true}); fmt.Sprint(names) != want {
		t.Errorf("workers registered: %v, want %s", names, want)
	}
}
