package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/logs"
)

// followStream reads a log stream's line events until its end event and sends the
// outcome: nil when the lines were exactly 1..total, in order, each once.
func followStream(events <-chan sseEvent, total int64) <-chan error {
	done := make(chan error, 1)
	go func() {
		after := int64(0)
		for ev := range events {
			switch ev.event {
			case "line":
				var l logs.Line
				if err := json.Unmarshal([]byte(ev.data), &l); err != nil {
					done <- err
					return
				}
				if l.Seq != after+1 || ev.id != strconv.FormatInt(l.Seq, 10) {
					done <- fmt.Errorf("line %d (id %s) after %d", l.Seq, ev.id, after)
					return
				}
				after = l.Seq
			case "end":
				if after != total {
					done <- fmt.Errorf("end event after line %d of %d", after, total)
				} else {
					done <- nil
				}
				return
			}
		}
		done <- fmt.Errorf("stream closed after line %d of %d, without an end event", after, total)
	}()
	return done
}

// TestLogStreamStalledReader: a reader that stops reading, so that the TCP buffers
// between it and the server fill, slows neither the job appending its lines nor the
// other readers.
func TestLogStreamStalledReader(t *testing.T) {
	t.Parallel()
	for name := range logStorages {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupLogs(t, name, 0)
			id, token := b.leasedJob(t)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()

			// The stalled reader: a raw connection that sends its request and never reads.
			u, err := url.Parse(b.url)
			if err != nil {
				t.Fatal(err)
			}
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(4096) // fill sooner
			}
			if _, err := fmt.Fprintf(conn, "GET /api/v1/jobs/%s/logs/stream HTTP/1.1\r\nHost: %s\r\n\r\n", id, u.Host); err != nil {
				t.Fatal(err)
			}

			const total, per = 200_000, 1000
			reader := followStream(b.sseStream(t, ctx, "/api/v1/jobs/"+id+"/logs/stream", ""), total)
			appended := make(chan error, 1)
			go func() {
				for first := int64(1); first <= total; first += per {
					r, err := postCtx(ctx, b.url+"/api/v1/agent/jobs/"+id+"/logs", batch(token, first, first+per-1, "output"))
					if err != nil {
						appended <- fmt.Errorf("append %d: %w", first, err)
						return
					}
					var ans struct {
						NextSeq int64 `json:"next_seq"`
					}
					if r.status != http.StatusOK || json.Unmarshal(r.body, &ans) != nil || ans.NextSeq != first+per {
						appended <- fmt.Errorf("append %d: %d %s", first, r.status, r.body)
						return
					}
				}
				r, err := postCtx(ctx, b.url+"/api/v1/agent/jobs/"+id+"/complete", `{"token": "`+token+`", "status": "success"}`)
				if err == nil && r.status != http.StatusOK {
					err = fmt.Errorf("%d %s", r.status, r.body)
				}
				if err != nil {
					err = fmt.Errorf("complete: %w", err)
				}
				appended <- err
			}()
			select {
			case err := <-appended:
				if err != nil {
					t.Fatalf("the job's appends with a stalled reader: %v", err)
				}
			case <-ctx.Done():
				t.Fatal("the job's appends did not complete with a stalled reader")
			}
			select {
			case err := <-reader:
				if err != nil {
					t.Fatalf("the other reader: %v", err)
				}
			case <-ctx.Done():
				t.Fatal("the other reader did not get every line and the end")
			}
		})
	}
}

// postCtx is a POST that reports its failure instead of failing the test, for use off
// the test's goroutine.
func postCtx(ctx context.Context, u, body string) (response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	buf, err := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: buf}, err
}
