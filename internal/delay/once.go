package delay

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Call tokens: go-redis sends a command again when its reply was lost (the
// connection was killed or timed out after Redis ran it; up to MaxRetries
// times). The producer's scripts act on what they find: run twice, a
// Schedule whose message was promoted in between creates it again (a
// second delivery, the first before the due time the call returned), a
// Cancel reports false for the message it removed, a Reschedule reports
// ErrNotFound for the message it moved. So every such call carries a
// token (but the calls callTokens.spares): its script stores, under the
// token's key (in the lane's slot) for callTokenTTL, what it needs to give
// the same reply again (its "now", one status digit per message and the
// due times of kept and refused ones;
// Cancel's and Reschedule's reply), and a second run of the call rebuilds
// that reply and changes nothing (internal/scripts/once.lua). A client
// that never re-sends (MaxRetries -1) makes no tokens. Cost: a GET and a
// SET with a time to live per script call (one per batch chunk, one per
// group-commit flush), and a key of about 100 bytes plus one per message
// of the call for the TTL.

// callTokenTTL returns how long a call's token is kept: longer than rdb may
// take to send a call again after its first run, and 0 when rdb never
// re-sends. Each re-send follows the failure of the previous attempt, which
// may take a dial, a write and a read timeout, then a backoff; 5 s more
// cover the clocks. With go-redis v9's defaults (3 retries, 5 s dial,
// write and read, 1 s backoff) it is 53 s.
func callTokenTTL(rdb redis.UniversalClient) time.Duration {
	var retries int
	var dial, write, read, backoff time.Duration
	switch c := rdb.(type) {
	case *redis.Client:
		o := c.Options()
		retries, dial, write, read, backoff = o.MaxRetries, o.DialTimeout, o.WriteTimeout, o.ReadTimeout, o.MaxRetryBackoff
	case *redis.ClusterClient:
		o := c.Options()
		retries, dial, write, read, backoff = o.MaxRetries, o.DialTimeout, o.WriteTimeout, o.ReadTimeout, o.MaxRetryBackoff
	case *redis.Ring:
		o := c.Options()
		retries, dial, write, read, backoff = o.MaxRetries, o.DialTimeout, o.WriteTimeout, o.ReadTimeout, o.MaxRetryBackoff
	default: // another UniversalClient: assume go-redis's defaults
		retries, dial, write, read, backoff = 3, 5*time.Second, 3*time.Second, 3*time.Second, 512*time.Millisecond
	}
	if retries <= 0 { // the options as the client normalised them: 0 = no retries
		return 0
	}
	// No timeout (negative after normalising) means a lost reply is seen
	// only when the connection fails: bound it.
	for _, d := range []*time.Duration{&dial, &write, &read} {
		if *d <= 0 {
			*d = 30 * time.Second
		}
	}
	return time.Duration(retries)*(dial+write+read+max(backoff, 0)) + 5*time.Second
}

// callTokens adds call tokens to a Queue's script calls.
type callTokens struct {
	ttl int64 // time to live of a token in ms; 0 when calls carry none
}

func newCallTokens(rdb redis.UniversalClient) callTokens {
	return callTokens{ttl: callTokenTTL(rdb).Milliseconds()}
}

// spares reports whether a call whose messages all have generated ids and
// whose items are items[from:to] of p can go without a token: each is due
// After a delay of at least twice the token's time to live. A generated id
// is known to nobody before the call returns, so nothing but promotion can
// take its member out of the delayed set; a second run of the call, sent
// within the token's time to live, then finds the member still waiting and
// its ZADD changes nothing but the due time, which it reports (the first
// run's reply was lost). The delay is measured by the Redis clock in the
// script, so no clock of this process is trusted. This spares each such
// call a key written and expired (about a fifth of the fast script's work
// in Redis).
func (t callTokens) spares(items []Item, p *batchPlan, from, to int) bool {
	if t.ttl == 0 {
		return true
	}
	least := 2 * time.Duration(t.ttl) * time.Millisecond
	for k := from; k < to; k++ {
		w := items[p.item(k)].When
		if w.kind != 1 || w.delay < least {
			return false
		}
	}
	return true
}

// add returns keys and args with a new call token of lane l added (see
// callTokenTTL), or as they are when calls carry no tokens. keys is not
// modified: lanes share their key slices.
func (t callTokens) add(l *laneArgs, keys []string, args []any) ([]string, []any) {
	if t.ttl == 0 {
		return keys, args
	}
	tok := strconv.FormatUint(rand.Uint64(), 36) + strconv.FormatUint(rand.Uint64(), 36)
	return append(keys[:len(keys):len(keys)], l.calls+tok), append(args, t.ttl)
}
