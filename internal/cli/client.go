package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
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
	// base is the coordinator's URL; others are more replicas of it, given with it as
	// a list (--server a,b,c, as workers take it): a request that cannot reach one is
	// sent to the next, and the one that answered is tried first from then on.
	mu     sync.Mutex // guards base and others: a command may send from several goroutines
	base   string
	others []string
	token  string
	http   *http.Client
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
	servers, err := parseServers(server)
	if err != nil {
		return nil, err
	}
	for i := range servers {
		servers[i] = strings.TrimRight(servers[i], "/")
	}
	return &apiClient{
		base:       servers[0],
		others:     servers[1:],
		token:      token,
		http:       &http.Client{},
		streamIdle: 45 * time.Second,
		retryEvery: 250 * time.Millisecond,
	}, nil
}

// baseURL is the coordinator's URL the next request goes to first.
func (c *apiClient) baseURL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.base
}

// answered puts the replica at u first, for the next requests to try first.
func (c *apiClient) answered(u string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slices.Index(c.others, u); i >= 0 {
		c.base, c.others[i] = c.others[i], c.base
	}
}

// notConnected reports an error of a request that never reached a server: the address
// did not resolve, or no connection could be made to it.
func notConnected(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// parseServers reads a --server value: a coordinator's URL, or several replicas' separated
// by commas.
func parseServers(value string) ([]string, error) {
	var out []string
	for _, u := range strings.Split(value, ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return nil, usagef("--server %q: want an http:// or https:// URL, or several separated by commas", u)
		}
		if slices.Contains(out, u) {
			return nil, usagef("--server: %s is given twice", u)
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, usagef("--server is required: the coordinator's URL, or several replicas' separated by commas")
	}
	return out, nil
}

// serverDetail is one item of an error answer's details: a pipeline mistake.
type serverDetail struct {
	File    string `json:"file"` // a reusable workflow the pipeline calls; "" for the pipeline itself
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
	// A single mistake is often the message itself (inputs.x: ...): said once.
	if len(e.Details) == 1 && strings.TrimSpace(e.detailLines()) == e.Message {
		return b.String()
	}
	b.WriteString(e.detailLines())
	return b.String()
}

// detailLines lists the details, each on its own indented line.
func (e *serverError) detailLines() string {
	var b strings.Builder
	for _, d := range e.Details {
		b.WriteString("\n  ")
		if d.File != "" {
			b.WriteString(d.File + ": ")
		}
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

// send is do with request headers. With several replicas, a request none of whose bytes
// left (the connection could not be made) goes to the next one; a body that cannot be
// read again (not bytes or a string) is sent to the first only.
func (c *apiClient) send(ctx context.Context, method, path string, body io.Reader, header http.Header) (*http.Response, error) {
	c.mu.Lock()
	base, others := c.base, slices.Clone(c.others)
	c.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
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
	for i := 0; err != nil && i < len(others) && notConnected(err) && (body == nil || req.GetBody != nil); i++ {
		next := req.Clone(ctx)
		if next.URL, err = url.Parse(others[i] + path); err != nil {
			return nil, err
		}
		next.Host = ""
		if body != nil {
			if next.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
		if resp, err = c.http.Do(next); err == nil {
			c.answered(others[i])
		}
	}
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

// callJSON is call with a JSON body, or with none when body is nil.
func (c *apiClient) callJSON(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	if body == nil {
		return c.call(ctx, method, path, nil, nil)
	}
	return c.call(ctx, method, path, bytes.NewReader(body), http.Header{"Content-Type": {"application/json"}})
}

// call sends a request and returns the whole body of its 2xx answer, for commands that
// print it as it is (--json) and decode it too.
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
