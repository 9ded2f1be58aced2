package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// MaxResponseHeaderBytes bounds the headers of an answer to an outbound request.
const MaxResponseHeaderBytes = 64 << 10

// ErrRefused is matched (errors.Is) by every RefusedError.
var ErrRefused = errors.New("destination refused")

// RefusedError is an outbound request the policy refused: the address it would dial (or
// the URL it names) is of the coordinator's own network, or the URL holds credentials.
type RefusedError struct {
	Host   string     // the host the request named
	Addr   netip.Addr // the address refused; invalid when the URL itself was refused
	Reason string
}

func (e *RefusedError) Error() string {
	switch {
	case !e.Addr.IsValid():
		return e.Reason
	case e.Host != "" && e.Host != e.Addr.String():
		verb := "resolves to"
		if _, err := netip.ParseAddr(e.Host); err == nil {
			verb = "stands for"
		} else if _, ok := legacyIPv4(e.Host); ok {
			verb = "stands for"
		}
		return fmt.Sprintf("%s %s %s, %s; not allowed unless the server's --outbound-allow lists it", e.Host, verb, e.Addr, e.Reason)
	}
	return fmt.Sprintf("%s is %s; not allowed unless the server's --outbound-allow lists it", e.Addr, e.Reason)
}

// Is makes a RefusedError match ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Policy says which destinations of the coordinator's own network outbound requests may
// reach. The zero Policy allows none: only public addresses.
type Policy struct {
	prefixes []netip.Prefix
	hosts    []string // lower case, without a trailing dot
}

// Parse reads an allow-list: comma-separated CIDR prefixes (10.0.0.0/8, fd00::/8),
// addresses (10.1.2.3, ::1) and host names (ghe.internal), which may then dial whatever
// address they resolve to. Empty allows nothing private.
func Parse(list string) (Policy, error) {
	var p Policy
	for _, e := range strings.Split(list, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if pfx, err := netip.ParsePrefix(e); err == nil {
			p.prefixes = append(p.prefixes, pfx.Masked())
			continue
		}
		if a, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
			a = a.Unmap().WithZone("")
			p.prefixes = append(p.prefixes, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		h := strings.TrimSuffix(strings.ToLower(e), ".")
		if !validHost(h) {
			return Policy{}, fmt.Errorf("%q is not a CIDR prefix (10.0.0.0/8), an address or a host name", e)
		}
		p.hosts = append(p.hosts, h)
	}
	return p, nil
}

// validHost accepts a DNS name: letters, digits, hyphens and dots, no empty label.
func validHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return false
		}
		for _, r := range label {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' && r != '_' {
				return false
			}
		}
	}
	return true
}

// String lists the allow-list as Parse reads it.
func (p Policy) String() string {
	var parts []string
	for _, pfx := range p.prefixes {
		parts = append(parts, pfx.String())
	}
	return strings.Join(append(parts, p.hosts...), ",")
}

func (p Policy) hostAllowed(host string) bool {
	return slices.Contains(p.hosts, strings.TrimSuffix(strings.ToLower(host), "."))
}

// addrAllowed is nil when a may be dialed, else why not.
func (p Policy) addrAllowed(a netip.Addr) *RefusedError {
	a = a.Unmap().WithZone("")
	reason := private(a)
	if reason == "" {
		return nil
	}
	for _, pfx := range p.prefixes {
		if pfx.Contains(a) {
			return nil
		}
	}
	return &RefusedError{Addr: a, Reason: reason}
}

// CheckURL refuses, before anything is stored, a URL that holds credentials or whose
// host is an address of the coordinator's own network the policy does not allow. A host
// name passes: what it resolves to is checked when it is dialed.
func (p Policy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("parse URL: %w", err)
	}
	if u.User != nil {
		return &RefusedError{Reason: "the URL holds credentials (user:password@); they would be stored and shown in plain text"}
	}
	host := u.Hostname()
	if p.hostAllowed(host) {
		return nil
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		if n, ok := legacyIPv4(host); ok {
			a = n
		} else {
			return nil
		}
	}
	if r := p.addrAllowed(a); r != nil {
		r.Host = host
		return r
	}
	return nil
}

// legacyIPv4 reads the forms of an IPv4 address that inet_aton accepts besides the dotted
// quad (2130706433, 0x7f.1, 0177.0.0.1, 127.1), so that a URL's host is judged as the
// address a resolver would make of it.
func legacyIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(parts))
	for i, part := range parts {
		base, digits := 10, part
		switch {
		case strings.HasPrefix(part, "0x") || strings.HasPrefix(part, "0X"):
			base, digits = 16, part[2:]
		case len(part) > 1 && part[0] == '0':
			base, digits = 8, part[1:]
		}
		n, err := strconv.ParseUint(digits, base, 32)
		if err != nil || digits == "" {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	// The last part fills the bytes the others leave.
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 0xff {
			return netip.Addr{}, false
		}
		v |= n << (8 * (3 - i))
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// Client returns an HTTP client whose every connection goes through the policy, that
// follows no redirect (a 3xx is the answer) and uses no proxy (a proxy would dial the
// destination where the policy cannot see it). timeout bounds each request.
func (p Policy) Client(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout:   timeout,
		Transport: p.Transport(),
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// Transport is the round tripper Client uses.
func (p Policy) Transport() *http.Transport {
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            p.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	}
}

// DialContext dials addr (host:port) if the policy allows it: a host name the allow-list
// names may reach any address; any other host only addresses outside the coordinator's
// network or allowed. The address is checked when the socket connects, after the name is
// resolved, so a name that resolves (or is re-pointed) to a private address is refused.
func (p Policy) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if !p.hostAllowed(host) {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return &RefusedError{Host: host, Reason: fmt.Sprintf("the address %q could not be checked", address)}
			}
			if r := p.addrAllowed(ap.Addr()); r != nil {
				r.Host = host
				return r
			}
			return nil
		}
	}
	return d.DialContext(ctx, network, addr)
}

// Special-purpose blocks beyond what netip classifies, none of which a public service
// answers on: IETF assignments, benchmarking, reserved, deprecated IPv6 forms.
var blocked = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `an address of "this network"`},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible IPv6 address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local NAT64 address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
}

// private says what kind of address of the coordinator's own network a is, or "" for a
// public one.
func private(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "not an address"
	case a.IsUnspecified():
		return "the unspecified address (this host)"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsLinkLocalUnicast():
		return "a link-local address (cloud metadata services answer there)"
	case a.IsPrivate():
		return "a private address"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "a multicast address"
	case a.Is4() && a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "the broadcast address"
	}
	for _, b := range blocked {
		if b.prefix.Contains(a) {
			return b.reason
		}
	}
	// IPv6 forms that carry an IPv4 address a gateway would reach: NAT64 and 6to4.
	if a.Is6() {
		b := a.As16()
		switch {
		case netip.MustParsePrefix("64:ff9b::/96").Contains(a):
			if r := private(netip.AddrFrom4([4]byte(b[12:16]))); r != "" {
				return r + " behind NAT64"
			}
		case netip.MustParsePrefix("2002::/16").Contains(a):
			if r := private(netip.AddrFrom4([4]byte(b[2:6]))); r != "" {
				return r + " behind 6to4"
			}
		}
	}
	return ""
}
