package web

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Host header must name the address the request came in on (with the
// loopback names on a loopback address) or a name of WithAllowedHosts:
// compared case-insensitively, IPv6 in brackets, a missing port being
// the scheme's default (80 or 443).
func TestHostAllowed(t *testing.T) {
	t.Parallel()
	s := offline(t, WithAllowedHosts("Queues.Example.com", "proxy.example:8443", "[2001:db8::1]:8080", "10.9.8.7")) // and example.com
	loop4 := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	loop6 := &net.TCPAddr{IP: net.IPv6loopback, Port: 8080}
	lan := &net.TCPAddr{IP: net.ParseIP("192.168.1.5"), Port: 80}
	for _, c := range []struct {
		host  string
		local net.Addr // nil: none in the context
		want  bool
	}{
		{"127.0.0.1:8080", loop4, true},
		{"localhost:8080", loop4, true},
		{"LocalHost:8080", loop4, true},
		{"localhost.:8080", loop4, true},
		{"[::1]:8080", loop4, true},
		{"[::1]:8080", loop6, true},
		{"127.0.0.1:8080", loop6, true},
		{"127.0.0.1:08080", loop4, true},
		{"localhost:8081", loop4, false},
		{"localhost", loop4, false}, // port 80, not 8080
		{"evil.example:8080", loop4, false},
		{"evil.example", loop4, false},
		{"127.0.0.1.evil.example:8080", loop4, false},
		{"localhost.evil.example:8080", loop4, false},
		{"", loop4, false},
		{":8080", loop4, false},
		{"localhost:notaport", loop4, false},
		{"192.168.1.5", lan, true}, // port 80 by default
		{"192.168.1.5:80", lan, true},
		{"[::ffff:192.168.1.5]:80", lan, true},
		{"192.168.1.5:8080", lan, false},
		{"localhost", lan, false}, // not a loopback address
		{"queues.example.com", nil, true},
		{"QUEUES.EXAMPLE.COM:9999", nil, true}, // no port given: any port
		{"proxy.example:8443", nil, true},
		{"proxy.example:8444", nil, false},
		{"proxy.example", nil, false}, // 80 or 443, not 8443
		{"[2001:db8::1]:8080", nil, true},
		{"[2001:db8:0:0::1]:8080", nil, true},
		{"[2001:db8::1]:8081", nil, false},
		{"10.9.8.7:1234", nil, true},
		{"example.com", nil, true},
		{"127.0.0.1:8080", nil, false}, // no local address: the names of WithAllowedHosts only
		{"evil.example", nil, false},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Host = c.host
		if c.local != nil {
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, c.local))
		}
		assert.Equal(t, c.want, s.hostAllowed(r), "Host %q on %v", c.host, c.local)
	}
}

// A request for another host is refused with 421 on every path, before
// authentication, with a fixed sentence that does not repeat the Host.
func TestHostRefusedEverywhere(t *testing.T) {
	t.Parallel()
	for _, s := range []*Server{offline(t), offline(t, WithBasicAuth("u", "p"))} {
		for _, path := range []string{"/", "/p/ds/", "/static/style.css", "/api/p/ds/queues", "/p/ds/q/orders/pause"} {
			for _, method := range []string{http.MethodGet, http.MethodPost} {
				r := httptest.NewRequest(method, path, nil)
				r.Host = "evil.example"
				r.Header.Set("Origin", "http://evil.example")
				r.Header.Set("Authorization", "Basic dTpw") // u:p
				w := httptest.NewRecorder()
				s.ServeHTTP(w, r)
				require.Equal(t, http.StatusMisdirectedRequest, w.Code, "%s %s", method, path)
				assert.NotContains(t, w.Body.String(), "evil", "%s %s", method, path)
				assert.NotContains(t, w.Body.String(), s.token, "%s %s", method, path)
				assert.Equal(t, "DENY", w.Header().Get("X-Frame-Options"), "security headers on the refusal too")
			}
		}
	}
}
