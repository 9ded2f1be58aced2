package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// defaultServer is the coordinator a client command talks to when neither --server,
// GANTRY_SERVER nor the config file names one: what `gantry up` and `gantry server`
// listen on by default.
const defaultServer = "http://127.0.0.1:8080"

// clientConfig says which coordinator a client command talks to. Server and Token come
// from the flag, else its GANTRY_* variable (set by the root command before RunE), else
// the config file, else the default; client resolves the last two.
type clientConfig struct {
	Server    string
	Token     string
	TokenFile string // read the token from this file instead
	Config    string // config file; empty: $XDG_CONFIG_HOME/gantry/config.yaml if it exists
	JSON      bool

	// lookupEnv finds XDG_CONFIG_HOME and HOME for the default config file; nil uses
	// the process environment.
	lookupEnv func(string) (string, bool)
}

// flags adds --server, --token, --config and --json to a client command.
func (c *clientConfig) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	// The flags default to empty so that an unset flag can fall through to the config
	// file; the real default is applied in client.
	f.StringVar(&c.Server, "server", "", "coordinator URL (default "+defaultServer+", or server: in the config file)")
	f.StringVar(&c.Token, "token", "", "API token (when the coordinator requires authentication)")
	f.StringVar(&c.TokenFile, "token-file", "", "read the API token from this file (its first line)")
	f.StringVar(&c.Config, "config", "", "client config file with server: and token: (default $XDG_CONFIG_HOME/gantry/config.yaml)")
	f.BoolVar(&c.JSON, "json", false, "print the API's JSON for scripts")
}

// clientFlags is flags for a command of a, whose environment also locates the config file.
func (a *app) clientFlags(cmd *cobra.Command, c *clientConfig) {
	c.lookupEnv = a.lookupEnv
	c.flags(cmd)
}

// apiClient calls a coordinator's REST API.
type apiClient struct {
	base  string
	token string
	http  *http.Client
	// streamIdle is how long a log stream may stay silent before it counts as dropped;
	// the server sends a keep-alive every 15 s.
	streamIdle time.Duration
	// retryEvery is the first wait before a dropped stream reconnects; it doubles to 5 s.
	retryEvery time.Duration
}

// client resolves the server and token (flag > environment > config file > default) and
// returns a client for them.
func (c *clientConfig) client() (*apiClient, error) {
	server, token := c.Server, c.Token
	if c.TokenFile != "" {
		if token != "" {
			return nil, usagef("--token (or GANTRY_TOKEN) and --token-file both give a token: give one")
		}
		t, err := readTokenFile(c.TokenFile)
		if err != nil {
			return nil, err
		}
		token = t
	}
	if server == "" || token == "" || c.Config != "" {
		fc, err := loadClientFile(c.Config, c.lookupEnv)
		if err != nil {
			return nil, err
		}
		if server == "" {
			server = fc.Server
		}
		if token == "" {
			token = fc.Token
		}
	}
	if server == "" {
		server = defaultServer
	}
	if !strings.HasPrefix(server, "http://") && !strings.HasPrefix(server, "https://") {
		return nil, usagef("--server %q: want an http:// or https:// URL", server)
	}
	return &apiClient{
		base:       strings.TrimRight(server, "/"),
		token:      token,
		http:       &http.Client{},
		streamIdle: 45 * time.Second,
		retryEvery: 250 * time.Millisecond,
	}, nil
}

// serverDetail is one item of an error answer's details: a pipeline mistake.
type serverDetail struct {
	Path    string `json:"path"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
	Code    string `json:"code"`
}

// serverError is an error answer of the coordinator, with its details.
type serverError struct {
	Status  int
	Code    string
	Message string
	Details []serverDetail
}

func (e *serverError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the server answered %d %s: %s", e.Status, e.Code, e.Message)
	b.WriteString(e.detailLines())
	return b.String()
}

// detailLines lists the details, each on its own indented line.
func (e *serverError) detailLines() string {
	var b strings.Builder
	for _, d := range e.Details {
		b.WriteString("\n  ")
		if d.Path != "" {
			b.WriteString(d.Path)
			if d.Line > 0 {
				fmt.Fprintf(&b, " (line %d", d.Line)
				if d.Column > 0 {
					fmt.Fprintf(&b, ", column %d", d.Column)
				}
				b.WriteString(")")
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
	return c.send(ctx, method, path, body, nil)
}

// send is do with request headers.
func (c *apiClient) send(ctx context.Context, method, path string, body io.Reader, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
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

// callTimeout bounds one request and its answer; streams have their own idle timeout.
const callTimeout = time.Minute

// call sends a request and returns the whole body of its 2xx answer, for commands that
// print it as it is (--json) and decode it too.
// callJSON is call with a JSON body, or with none when body is nil.
func (c *apiClient) callJSON(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	if body == nil {
		return c.call(ctx, method, path, nil, nil)
	}
	return c.call(ctx, method, path, bytes.NewReader(body), http.Header{"Content-Type": {"application/json"}})
}

func (c *apiClient) call(ctx context.Context, method, path string, body io.Reader, header http.Header) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.send(ctx, method, path, body, header)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read the server's answer: %w", err)
	}
	return raw, nil
}

// getJSON decodes the answer of a GET into out.
func (c *apiClient) getJSON(ctx context.Context, path string, out any) error {
	_, err := c.getRaw(ctx, path, out)
	return err
}

// getRaw is getJSON that also returns the answer as it came.
func (c *apiClient) getRaw(ctx context.Context, path string, out any) ([]byte, error) {
	raw, err := c.call(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("read the server's answer: %w", err)
	}
	return raw, nil
}

// postRaw sends a POST without a body and decodes its answer into out, returning the
// answer as it came too.
func (c *apiClient) postRaw(ctx context.Context, path string, out any) ([]byte, error) {
	raw, err := c.call(ctx, http.MethodPost, path, nil, nil)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("read the server's answer: %w", err)
	}
	return raw, nil
}

// writeRaw prints an API answer as the server sent it, on one line.
func writeRaw(w io.Writer, raw []byte) error {
	raw = []byte(strings.TrimRight(string(raw), "\n"))
	_, err := fmt.Fprintf(w, "%s\n", raw)
	return err
}
