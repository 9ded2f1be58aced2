package blob

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// ResponseError is a non-2xx answer to a signed request made by Send.
type ResponseError struct {
	Method     string
	Path       string // the URL's path; the query, which holds the signature, is left out
	StatusCode int
	Code       string // the server's error code, when it gave one ("expired", "SignatureDoesNotMatch")
	Message    string // the server's message, or the start of its body
}

func (e *ResponseError) Error() string {
	msg := e.Message
	if e.Code != "" {
		msg = e.Code + ": " + msg
	}
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode), msg)
}

// Is makes the answers that mean a missing blob ErrNotFound, and those that mean the body
// did not match its digest or size ErrMismatch, for either store.
func (e *ResponseError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrMismatch:
		switch e.Code {
		case "digest_mismatch", "size_mismatch", // dir store
			"BadDigest", "XAmzContentSHA256Mismatch", "XAmzContentChecksumMismatch", "InvalidDigest", "IncompleteBody": // S3
			return true
		}
	}
	return false
}

// maxErrorBody bounds how much of an error answer Send reads for its message.
const maxErrorBody = 64 << 10

// Send performs a signed request: it resolves a relative URL against base, sets s.Header,
// streams body (with ContentLength = size for a PUT; a negative size sends it chunked) and
// returns the response, which the caller closes. A non-2xx answer is returned as a
// *ResponseError naming the status and the server's message.
func Send(ctx context.Context, c *http.Client, base *url.URL, s Signed, body io.Reader, size int64) (*http.Response, error) {
	if c == nil {
		c = http.DefaultClient
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		return nil, fmt.Errorf("send signed %s: bad URL: %w", s.Method, err)
	}
	if !u.IsAbs() {
		if base == nil {
			return nil, fmt.Errorf("send signed %s %s: the URL is relative and no base URL was given", s.Method, u.Path)
		}
		u = base.ResolveReference(u)
	}
	if s.Method != http.MethodPut {
		body = nil
	}
	req, err := http.NewRequestWithContext(ctx, s.Method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("send signed %s %s: %w", s.Method, u.Path, err)
	}
	if s.Method == http.MethodPut {
		switch {
		case size == 0:
			req.Body, req.ContentLength = http.NoBody, 0
		case size > 0:
			req.ContentLength = size
		default:
			req.ContentLength = -1
		}
	}
	for k, v := range s.Header {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length": // carried by req.ContentLength
		case "Host":
			if len(v) > 0 {
				req.Host = v[0]
			}
		default:
			req.Header[http.CanonicalHeaderKey(k)] = append([]string(nil), v...)
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("send signed %s %s: %w", s.Method, u.Path, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &ResponseError{Method: s.Method, Path: u.Path, StatusCode: resp.StatusCode}
	e.Code, e.Message = parseErrorBody(raw)
	return nil, e
}

// parseErrorBody reads the dir store's JSON error or S3's XML one, falling back to the
// start of the body.
func parseErrorBody(raw []byte) (code, message string) {
	var j struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &j) == nil && (j.Error.Code != "" || j.Error.Message != "") {
		return j.Error.Code, j.Error.Message
	}
	var x struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	if xml.Unmarshal(raw, &x) == nil && (x.Code != "" || x.Message != "") {
		return x.Code, x.Message
	}
	msg := strings.TrimSpace(string(raw))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = "(empty body)"
	}
	return "", msg
}
