package cli

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
)

// DefaultURL is the server [Connect] reaches when given none.
const DefaultURL = "redis://localhost:6379"

// ConnConfig says how to reach Redis.
type ConnConfig struct {
	// URL is redis://[user:password@]host:port[/db] or rediss:// for TLS
	// (the ACL user and password in the URL). Several comma-separated
	// host:port in its host part ("redis://a:7000,b:7001") name the seed
	// nodes of a Cluster. Default DefaultURL.
	URL string
	// Cluster makes a Cluster client even from one seed address.
	Cluster bool
	// TLS, when not nil, is used for the connections (it implies TLS
	// with a redis:// URL too); with rediss:// and no TLS, the system's
	// roots verify the server.
	TLS *tls.Config
	// Timeout bounds dialing and each read and write. Default 5 s.
	Timeout time.Duration
}

// Connect returns a client for cfg: a *redis.ClusterClient when cfg.Cluster
// is set or the URL names several addresses, else a *redis.Client. It talks
// to no server; the caller owns the client and closes it. Errors wrap
// delaystream.ErrInvalidOption.
func Connect(cfg ConnConfig) (redis.UniversalClient, error) {
	raw := cfg.URL
	if raw == "" {
		raw = DefaultURL
	}
	if !strings.Contains(raw, "://") {
		raw = "redis://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, urlError(raw, err)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("%w: redis URL scheme %q: want redis:// or rediss://", delaystream.ErrInvalidOption, u.Scheme)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	addrs := strings.Split(u.Host, ",")
	if cfg.Cluster || len(addrs) > 1 {
		first := *u
		first.Host = addrs[0]
		q := first.Query()
		for _, a := range addrs[1:] {
			q.Add("addr", a)
		}
		first.RawQuery = q.Encode()
		first.Path = "" // a cluster has only db 0
		opt, err := redis.ParseClusterURL(first.String())
		if err != nil {
			return nil, urlError(raw, err)
		}
		if cfg.TLS != nil {
			opt.TLSConfig = cfg.TLS.Clone()
		}
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = timeout, timeout, timeout
		opt.MaxRedirects = 8
		return redis.NewClusterClient(opt), nil
	}
	opt, err := redis.ParseURL(u.String())
	if err != nil {
		return nil, urlError(raw, err)
	}
	if cfg.TLS != nil {
		opt.TLSConfig = cfg.TLS.Clone()
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = timeout, timeout, timeout
	return redis.NewClient(opt), nil
}

// redacted is what an error shows of a password.
const redacted = "xxxxx"

// urlError is the error of the redis URL raw that parsing refused with
// err. It names the URL with its password replaced by "xxxxx" (as
// url.URL.Redacted does, which a URL that does not parse cannot use), and
// gives err's text with the password taken out: every occurrence of it
// (as written and decoded), of each piece of it between the characters
// that end a URL's part ("/", "?", "#", "@": an unescaped one splits the
// password into a port, a path...), and every quoted value that is a
// piece of it (url.Parse quotes the bad part: a port, an escape). The
// chain of err is not kept, since it holds the password; the error wraps
// delaystream.ErrInvalidOption.
func urlError(raw string, err error) error {
	msg := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		msg = ue.Err.Error() // without the URL, named below
	}
	pw := passwordOf(raw)
	if pw == "" {
		return fmt.Errorf("%w: redis URL %s: %s", delaystream.ErrInvalidOption, raw, msg)
	}
	secrets := []string{pw}
	if dec, derr := url.PathUnescape(pw); derr == nil && dec != pw {
		secrets = append(secrets, dec)
	}
	isSecret := func(s string) bool {
		for _, sec := range secrets {
			if strings.Contains(sec, s) {
				return true
			}
		}
		return false
	}
	msg = quotedRE.ReplaceAllStringFunc(msg, func(q string) string {
		if v, err := strconv.Unquote(q); err == nil && strings.Trim(v, ":") != "" && isSecret(strings.Trim(v, ":")) {
			return `"` + redacted + `"`
		}
		return q
	})
	pieces := strings.FieldsFunc(pw, func(r rune) bool { return strings.ContainsRune("/?#@", r) })
	for _, sec := range append(secrets, pieces...) {
		if sec != "" {
			msg = strings.ReplaceAll(msg, sec, redacted)
		}
	}
	return fmt.Errorf("%w: redis URL %s: %s", delaystream.ErrInvalidOption, redactURL(raw), msg)
}

// quotedRE matches a Go-quoted string (%q) in an error's text.
var quotedRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// userinfoOf returns where the user information of the URL raw
// ("scheme://user:password@host...") starts and ends in raw; ok is false
// when it has none. The end is the last "@" (a password may hold "/", "?"
// or "#" that were not escaped, which would end the authority earlier).
func userinfoOf(raw string) (start, end int, ok bool) {
	i := strings.Index(raw, "://")
	if i < 0 {
		return 0, 0, false
	}
	start = i + len("://")
	at := strings.LastIndex(raw[start:], "@")
	if at < 0 {
		return 0, 0, false
	}
	return start, start + at, true
}

// passwordOf returns the password in the URL raw, as written; "" when it
// has none.
func passwordOf(raw string) string {
	start, end, ok := userinfoOf(raw)
	if !ok {
		return ""
	}
	_, pw, _ := strings.Cut(raw[start:end], ":")
	return pw
}

// redactURL returns raw with the password of its user information replaced
// by "xxxxx".
func redactURL(raw string) string {
	start, end, ok := userinfoOf(raw)
	if !ok {
		return raw
	}
	user, _, has := strings.Cut(raw[start:end], ":")
	if !has {
		return raw
	}
	return raw[:start] + user + ":" + redacted + raw[end:]
}
