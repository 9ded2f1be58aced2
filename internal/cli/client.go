package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// clientConfig says which coordinator a client command talks to.
type clientConfig struct {
	Server string
	Token  string
	JSON   bool
}

// clientFlags adds --server, --token and --json to a client command.
func (c *clientConfig) flags(cmd *cobra.Command) {
	c.Server = "http://127.0.0.1:8080"
	f := cmd.Flags()
	f.StringVar(&c.Server, "server", c.Server, "coordinator URL")
	f.StringVar(&c.Token, "token", "", "API token (when the coordinator requires authentication)")
	f.BoolVar(&c.JSON, "json", false, "print JSON for scripts")
}

// apiClient calls a coordinator's REST API.
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

func (c *clientConfig) client() (*apiClient, error) {
	if !strings.HasPrefix(c.Server, "http://") && !strings.HasPrefix(c.Server, "https://") {
		return nil, usagef("--server %q: want an http:// or https:// URL", c.Server)
	}
	return &apiClient{base: strings.TrimRight(c.Server, "/"), token: c.Token, http: &http.Client{}}, nil
}

// serverError is an error answer of the coordinator, with its details.
type serverError struct {
	Status  int
	Code    string
	Message string
	Details []struct {
		Path    string `json:"path"`
		Line    int    `json:"line"`
		Message string `json:"message"`
	}
}

func (e *serverError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the server answered %d %s: %s", e.Status, e.Code, e.Message)
	for _, d := range e.Details {
		b.WriteString("\n  ")
		if d.Path != "" {
			b.WriteString(d.Path)
			if d.Line > 0 {
				fmt.Fprintf(&b, " (line %d)", d.Line)
			}
			b.WriteString(": ")
		}
		b.WriteString(d.Message)
	}
	return b.String()
}

// do sends a request and returns the response of a 2xx answer (the caller closes it); an
// error answer becomes a *serverError.
func (c *apiClient) do(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reach the server: %w", err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	se := &serverError{Status: resp.StatusCode}
	var e struct {
		Error struct {
			Code    string          `json:"code"`
			Message string          `json:"message"`
			Details json.RawMessage `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
		se.Code, se.Message = e.Error.Code, e.Error.Message
		_ = json.Unmarshal(e.Error.Details, &se.Details)
	} else {
		se.Code, se.Message = http.StatusText(resp.StatusCode), strings.TrimSpace(string(raw))
	}
	return nil, se
}

// getJSON decodes the answer of a GET into out.
func (c *apiClient) getJSON(ctx context.Context, path string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("read the server's answer: %w", err)
	}
	return nil
}
