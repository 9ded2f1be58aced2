package api

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// codeMisdirected answers a request whose Host is not a name this server answers to.
const codeMisdirected = "misdirected_request"

// writeMediaTypes are the request bodies the API reads. None of them is one a web page
// can send across origins without a CORS preflight (which this server never grants), so
// requiring one of them on every write keeps other sites' pages from writing at all.
var writeMediaTypes = map[string]bool{
	"application/json":     true,
	"application/yaml":     true,
	"application/x-yaml":   true,
	"text/yaml":            true,
	"text/x-yaml":          true,
	"application/x-ndjson": true,
}

// admit applies the rules that keep web pages of other sites out, before any route runs:
// with authentication off (gantry up on loopback), a page the user visits could otherwise
// submit a run with a "simple" request (a form post, or fetch with mode no-cors and a
// text/plain body), or read answers after rebinding its own DNS name to 127.0.0.1.
//
//   - A request whose Host is not a loopback name or the address it came in on gets 421
//     when auth is off (DNS rebinding sends the attacker's name as Host).
//   - A write whose Origin is another site's, or whose Sec-Fetch-Site says cross-site,
//     gets 403.
//   - A write with a body must say it is JSON or YAML (415 otherwise); a Content-Type,
//     when sent, must be one of those even on an empty body.
//
// The blob store's signed upload takes raw bytes and carries its own authorization in
// its signature, so it is exempt from the media-type rule only. It reports whether the
// request may go on; when not, the answer is written.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) bool {
	if !s.auth && !s.hostAllowed(r) {
		writeError(w, http.StatusMisdirectedRequest, codeMisdirected, fmt.Sprintf(
			"Host %q is not a name of this server: with authentication off it answers only requests addressed to "+
				"localhost, a loopback address or the address it listens on", r.Host), nil)
		return false
	}
	if !isWrite(r.Method) {
		return true
	}
	if site := r.Header.Get("Sec-Fetch-Site"); strings.EqualFold(site, "cross-site") {
		writeError(w, http.StatusForbidden, codeForbidden,
			"cross-site write refused: the browser says a page of another site sent it", nil)
		return false
	}
	if origin := r.Header.Get("Origin"); origin != "" && !s.originAllowed(origin, r.Host) {
		writeError(w, http.StatusForbidden, codeForbidden, fmt.Sprintf(
			"cross-origin write refused: Origin %q is not this server's (%s)", origin, r.Host), nil)
		return false
	}
	if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, s.blobPrefix) {
		return true
	}
	// A forge's webhook is authenticated by its signature; GitHub may send it form-encoded
	// (payload=...), which the hook handler alone reads, and checks the type of itself.
	if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/api/v1/hooks/") {
		return true
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		if r.ContentLength == 0 {
			return true
		}
		writeError(w, http.StatusUnsupportedMediaType, codeUnsupportedMedia,
			"a request with a body needs a Content-Type: add the header "+addContentType, nil)
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		writeError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf("bad Content-Type %q: %v", ct, err), nil)
		return false
	}
	if !writeMediaTypes[mt] {
		msg := fmt.Sprintf("Content-Type %q is not accepted: send the header %s", mt, addContentType)
		if mt == "application/x-www-form-urlencoded" {
			// What curl -d sends when told nothing else: the usual way here.
			msg += " (curl -d sends " + mt + " unless told otherwise: add -H 'Content-Type: application/json')"
		}
		writeError(w, http.StatusUnsupportedMediaType, codeUnsupportedMedia, msg, nil)
		return false
	}
	return true
}

// addContentType is the header a 415 tells the caller to add.
const addContentType = `"Content-Type: application/json" (or "Content-Type: application/yaml" for a pipeline)`

func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	return true
}

// hostAllowed reports whether the request's Host names this server: a loopback name or
// address, the local address the connection came in on, or a configured host. A browser
// always sends Host; a request without one cannot come from a rebound page.
func (s *Server) hostAllowed(r *http.Request) bool {
	if r.Host == "" {
		return true
	}
	host := strings.ToLower(r.Host)
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && host == strings.ToLower(local.String()) {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	// Browsers resolve localhost and *.localhost to loopback themselves (RFC 6761), so a
	// page cannot rebind those names.
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	if ip := net.ParseIP(name); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, h := range s.allowedHosts {
		if host == h || name == h {
			return true
		}
	}
	return false
}

// originAllowed reports whether a page of origin may write: it is this server's own
// (same host and port as the request's Host) or a configured one. The scheme is not
// compared: a proxy terminating TLS forwards https pages' requests over plain HTTP, and
// one host and port serve one server whatever the scheme.
func (s *Server) originAllowed(origin, reqHost string) bool {
	origin = strings.ToLower(strings.TrimSuffix(origin, "/"))
	for _, o := range s.allowedOrigins {
		if origin == o {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // "null" (sandboxed frames, file: pages) and anything odd
	}
	def := ":80"
	if u.Scheme == "https" {
		def = ":443"
	}
	return strings.TrimSuffix(u.Host, def) == strings.TrimSuffix(strings.ToLower(reqHost), def)
}

// normalizeOrigins lowercases configured origins and drops trailing slashes, as
// originAllowed compares them.
func normalizeOrigins(in []string) []string {
	out := make([]string, 0, len(in))
	for _, o := range in {
		if o = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(o), "/")); o != "" {
			out = append(out, o)
		}
	}
	return out
}
