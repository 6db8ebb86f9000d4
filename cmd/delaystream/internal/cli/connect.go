package cli

import (
	"crypto/tls"
	"fmt"
	"net/url"
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
		return nil, fmt.Errorf("%w: redis URL: %w", delaystream.ErrInvalidOption, err)
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
			return nil, fmt.Errorf("%w: redis URL: %w", delaystream.ErrInvalidOption, err)
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
		return nil, fmt.Errorf("%w: redis URL: %w", delaystream.ErrInvalidOption, err)
	}
	if cfg.TLS != nil {
		opt.TLSConfig = cfg.TLS.Clone()
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = timeout, timeout, timeout
	return redis.NewClient(opt), nil
}
