package web

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// hostPort is a host the server answers to: a canonical name or IP (see
// canonHost) and a port, "" for any.
type hostPort struct{ host, port string }

// parseAllowedHost parses a name given to WithAllowedHosts: a host name or
// IP (IPv6 with or without brackets), with or without a port.
func parseAllowedHost(s string) (hostPort, error) {
	if s == "" {
		return hostPort{}, errors.New("empty")
	}
	if strings.ContainsAny(s, "/?#@\\ \t\r\n") {
		return hostPort{}, errors.New("not a host or host:port")
	}
	return canonHostPort(s)
}

// canonHostPort splits s, a Host header or a name given to
// WithAllowedHosts, into its host and port in the form they are compared
// in (canonHost, canonPort), and fails when it names no host or a port that
// is not a TCP port.
func canonHostPort(s string) (hostPort, error) {
	host, port := splitHost(s)
	hp := hostPort{host: canonHost(host)}
	if hp.host == "" {
		return hostPort{}, errors.New("no host")
	}
	if port != "" {
		p, ok := canonPort(port)
		if !ok {
			return hostPort{}, errors.New("port must be 1 to 65535")
		}
		hp.port = p
	}
	return hp, nil
}

// splitHost splits a Host header (or an allowed name) into its host,
// without IPv6 brackets, and its port ("" when it has none).
func splitHost(s string) (host, port string) {
	if h, p, err := net.SplitHostPort(s); err == nil {
		return h, p
	}
	return strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), ""
}

// canonHost returns host in the form hosts are compared in: an IP in its
// canonical text (IPv4-mapped IPv6 as IPv4, no zone), a name in lower case
// without a final dot.
func canonHost(host string) string {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.WithZone("").Unmap().String()
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// canonPort returns port without leading zeros, and whether it is a TCP
// port (1 to 65535).
func canonPort(port string) (string, bool) {
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", false
	}
	return strconv.Itoa(n), true
}

// hostAllowed reports whether the Host header of r names this server: the
// address the request came in on (net/http puts it in the request's
// context, http.LocalAddrContextKey), the loopback names when that address
// is a loopback one, or a name of WithAllowedHosts. A request without that
// address in its context (a handler called directly, not through an
// http.Server) is checked against WithAllowedHosts alone.
func (s *Server) hostAllowed(r *http.Request) bool {
	req, err := canonHostPort(r.Host)
	if err != nil {
		return false // HTTP/1.0 without Host, an empty one, or a bad port
	}
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil {
		if ap, err := netip.ParseAddrPort(local.String()); err == nil {
			ip, lp := ap.Addr().WithZone("").Unmap(), strconv.Itoa(int(ap.Port()))
			if req.names(hostPort{ip.String(), lp}) {
				return true
			}
			if ip.IsLoopback() && (req.names(hostPort{"localhost", lp}) || req.names(hostPort{"127.0.0.1", lp}) ||
				req.names(hostPort{"::1", lp})) {
				return true
			}
		}
	}
	return slices.ContainsFunc(s.cfg.allowedHosts, req.names)
}

// names reports whether h, the host and port of a Host header (canonical,
// see canonHostPort), names a, a host the server answers to (its port ""
// for any). A Host without a port names the scheme's default port: 80, or
// 443 behind a TLS proxy.
func (h hostPort) names(a hostPort) bool {
	switch {
	case a.host != h.host:
		return false
	case a.port == "" || a.port == h.port:
		return true
	case h.port == "":
		return a.port == "80" || a.port == "443"
	}
	return false
}

// checkHost refuses every request whose Host header does not name this
// server, before anything else reads it (authentication, the routes).
//
// Why: a web page of evil.example can make its own name resolve to
// 127.0.0.1 once it is loaded (DNS rebinding); its script then talks to
// this server as "its own origin": it can read the pages (the CSRF token
// with them) and post actions, and the browser sends Host: evil.example.
// Answering only to the names this server is reached by ends that.
//
// The answer is 421 Misdirected Request (RFC 9110, 15.5.20): the request
// was sent to a server that does not answer for that host. Unlike 403, it
// says nothing about credentials or permissions (there are none to get:
// no request under that name will ever be served), and it is not cached by
// default. The body is a fixed sentence that does not repeat the request.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r) {
			s.cfg.logger.WarnContext(r.Context(), "web: request for another host refused",
				slog.String("host", clip(r.Host)), slog.String("remote", r.RemoteAddr))
			http.Error(w, "misdirected request: this server does not answer to that host name "+
				"(names it answers to beyond its own address are given with --allowed-host)", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// clip returns s, or its first 100 bytes marked as cut: what a log line
// quotes of a request header.
func clip(s string) string {
	if len(s) <= 100 {
		return s
	}
	return s[:100] + "…"
}
