package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// client speaks the coordinator's HTTP API.
type client struct {
	base string
	http *http.Client
}

// newClient returns a client with at most conns connections to base (more requests at
// once wait for one), all kept open when idle.
func newClient(base string, conns int) *client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conns
	tr.MaxIdleConnsPerHost = conns
	tr.MaxConnsPerHost = conns
	return &client{base: strings.TrimRight(base, "/"), http: &http.Client{Transport: tr, Timeout: 2 * time.Minute}}
}

// apiError is an answer outside 2xx.
type apiError struct {
	Status int
	Body   string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.Status, strings.TrimSpace(e.Body))
}

// do sends body (JSON-encoded unless it is a []byte, sent as contentType) and decodes a
// JSON answer into out when out is not nil.
func (c *client) do(ctx context.Context, method, path, contentType string, body any, out any) error {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return err
		}
		rd, contentType = bytes.NewReader(raw), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return &apiError{Status: resp.StatusCode, Body: string(raw)}
	}
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func (c *client) post(ctx context.Context, path string, body, out any) error {
	return c.do(ctx, http.MethodPost, path, "", body, out)
}

// postLines posts body as JSON to an endpoint that answers two JSON lines (a completion
// that carries a claim): first is called once the first line arrived, and the second is
// decoded into out.
func (c *client) postLines(ctx context.Context, path string, body any, first func(), out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return &apiError{Status: resp.StatusCode, Body: string(raw)}
	}
	dec := json.NewDecoder(resp.Body)
	var done json.RawMessage
	if err := dec.Decode(&done); err != nil {
		return fmt.Errorf("read the first line of the answer: %w", err)
	}
	first()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("read the second line of the answer: %w", err)
	}
	return nil
}

// submitted is the coordinator's answer to a new run.
type submitted struct {
	ID   string `json:"id"`
	Jobs []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"jobs"`
}

// submit posts a pipeline definition as a new run.
func (c *client) submit(ctx context.Context, yaml []byte) (*submitted, error) {
	var s submitted
	if err := c.do(ctx, http.MethodPost, "/api/v1/runs", "application/yaml", yaml, &s); err != nil {
		return nil, fmt.Errorf("submit run: %w", err)
	}
	return &s, nil
}

// metricValue reads one sample (the sum over its label sets matching labels) from the
// coordinator's /metrics.
func (c *client) metricValue(ctx context.Context, name, labels string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, name) || strings.HasPrefix(line, "#") {
			continue
		}
		rest := line[len(name):]
		if rest != "" && rest[0] != ' ' && rest[0] != '{' {
			continue // a longer name
		}
		if labels != "" && !strings.Contains(rest, labels) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(rest[strings.LastIndexByte(rest, ' ')+1:], &v); err != nil {
			return 0, fmt.Errorf("parse %q: %w", line, err)
		}
		sum += v
	}
	return sum, nil
}
