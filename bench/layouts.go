package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/wire"
)

// The layouts scenario measures Redis memory per waiting message, and Redis
// CPU per promoted message, for the library's two kinds of delayed-set
// member (plain: caller-chosen ids; packed: generated ids) and for the
// candidate layouts studied before packed members were chosen (kept to show
// why: an id index costs memory and doubles promotion CPU). Everything is
// written with plain commands, not through the library, on the same server
// with the same ids (delay.NewID ULIDs) and envelopes (wire.MarshalEnvelope
// of the bench payload).

// layoutIndexBuckets is the number of listpack hashes an id -> due index is
// spread over in the candidates that have one: few enough entries each
// (about 25 at 100k messages) to stay under the default
// hash-max-listpack-entries (128).
const layoutIndexBuckets = 4096

// layout is one candidate: key writes for a batch of messages.
type layout struct {
	key, label string
	write      func(p redis.Pipeliner, ids []string, envs [][]byte, dues []int64)
}

var layouts = []layout{
	{"layout_current", "plain members: zset id -> due + hash id -> envelope", func(p redis.Pipeliner, ids []string, envs [][]byte, dues []int64) {
		z := make([]redis.Z, len(ids))
		h := make([]any, 0, 2*len(ids))
		for i, id := range ids {
			z[i] = redis.Z{Score: float64(dues[i]), Member: id}
			h = append(h, id, envs[i])
		}
		p.ZAdd(context.Background(), "z", z...)
		p.HSet(context.Background(), "m", h...)
	}},
	{"layout_packed", "packed members: zset member = 0x01 + id's random part + envelope", func(p redis.Pipeliner, ids []string, envs [][]byte, dues []int64) {
		z := make([]redis.Z, len(ids))
		for i, id := range ids {
			z[i] = redis.Z{Score: float64(dues[i]), Member: "\x01" + id[10:] + string(envs[i])}
		}
		p.ZAdd(context.Background(), "z", z...)
	}},
	{"layout_merged", "merged: zset member = id + envelope, no hash, no index", func(p redis.Pipeliner, ids []string, envs [][]byte, dues []int64) {
		p.ZAdd(context.Background(), "z", mergedMembers(ids, envs, dues)...)
	}},
	{"layout_merged_index", "merged + id -> due index (4096 listpack hashes)", func(p redis.Pipeliner, ids []string, envs [][]byte, dues []int64) {
		p.ZAdd(context.Background(), "z", mergedMembers(ids, envs, dues)...)
		writeIndex(p, ids, dues)
	}},
	{"layout_merged_index_bin", "merged + index, ULIDs stored as 16 bytes", func(p redis.Pipeliner, ids []string, envs [][]byte, dues []int64) {
		bin := make([]string, len(ids))
		for i, id := range ids {
			bin[i] = ulidBytes(id)
		}
		p.ZAdd(context.Background(), "z", mergedMembers(bin, envs, dues)...)
		writeIndex(p, bin, dues)
	}},
}

// mergedMembers returns sorted-set members holding a length byte, the id
// and the envelope, scored by due.
func mergedMembers(ids []string, envs [][]byte, dues []int64) []redis.Z {
	z := make([]redis.Z, len(ids))
	for i, id := range ids {
		m := make([]byte, 0, 1+len(id)+len(envs[i]))
		m = append(m, byte(len(id)))
		m = append(append(m, id...), envs[i]...)
		z[i] = redis.Z{Score: float64(dues[i]), Member: m}
	}
	return z
}

// writeIndex writes id -> due into the index buckets of the ids.
func writeIndex(p redis.Pipeliner, ids []string, dues []int64) {
	byBucket := map[string][]any{}
	for i, id := range ids {
		b := indexBucket(id)
		byBucket[b] = append(byBucket[b], id, dues[i])
	}
	for b, fv := range byBucket {
		p.HSet(context.Background(), b, fv...)
	}
}

// indexBucket returns the key of id's index bucket: one of
// layoutIndexBuckets hashes, chosen by an FNV-1a hash of the id.
func indexBucket(id string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return "i:" + strconv.FormatUint(uint64(h.Sum32()%layoutIndexBuckets), 10)
}

// fill writes the messages in layout l, in pipelines of 1000.
func (b *bench) fill(ctx context.Context, l layout, ids []string, envs [][]byte, dues []int64) error {
	const chunk = 1000
	for i := 0; i < len(ids); i += chunk {
		j := min(i+chunk, len(ids))
		p := b.admin.Pipeline()
		l.write(p, ids[i:j], envs[i:j], dues[i:j])
		if _, err := p.Exec(ctx); err != nil {
			return fmt.Errorf("%s: %w", l.key, err)
		}
	}
	return nil
}

// ulidBytes returns the 16 bytes a 26-character ULID encodes.
func ulidBytes(id string) string {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	var hi, lo uint64 // 128 bits, big-endian: hi holds the top 64
	for i := 0; i < len(id); i++ {
		d := uint64(0)
		for j := 0; j < len(alphabet); j++ {
			if alphabet[j] == id[i] {
				d = uint64(j)
				break
			}
		}
		hi = hi<<5 | lo>>59
		lo = lo<<5 | d
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	return string(b[:])
}

// layoutsRun writes memN messages due in an hour in each layout, on an
// emptied server each time, and returns used_memory delta / memN per
// layout.
func (b *bench) layoutsRun(ctx context.Context, sysName string, run int) (map[string]float64, error) {
	n := b.cfg.memN
	ids := make([]string, n)
	envs := make([][]byte, n)
	dues := make([]int64, n)
	due := time.Now().Add(time.Hour)
	for i := range ids {
		ids[i] = delay.NewID()
		envs[i] = wire.MarshalEnvelope(&codec.Envelope{
			Payload: payloadFor(i, due, b.cfg.payload), Attempt: 1, Created: time.Now(),
		})
		dues[i] = due.UnixMilli() + int64(i%1000)
	}
	v := map[string]float64{}
	for _, l := range layouts {
		if err := b.admin.FlushAll(ctx).Err(); err != nil {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
		s0, err := takeSnap(ctx, b.admin)
		if err != nil {
			return nil, err
		}
		if err := b.fill(ctx, l, ids, envs, dues); err != nil {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
		s1, err := takeSnap(ctx, b.admin)
		if err != nil {
			return nil, err
		}
		v[l.key] = float64(s1.mem-s0.mem) / float64(n)
	}
	// Promotion: all due (an hour ago), promoted in batches of promoteBatch.
	past := time.Now().Add(-time.Hour).UnixMilli()
	for i := range dues {
		dues[i] = past + int64(i%1000)
	}
	// Two passes, the second in reverse order, averaged: in a single pass
	// the order mattered (the same script measured 4.1 µs second and
	// 5.5 µs first, right after the memory fills were flushed).
	for pass := range 2 {
		for i := range 4 {
			l := layouts[i]
			if pass == 1 {
				l = layouts[3-i]
			}
			cpu, err := b.promoteCost(ctx, l, ids, envs, dues)
			if err != nil {
				return nil, err
			}
			v[l.key+"_promote_cpu"] += cpu / 2
		}
	}
	if run == 1 {
		b.res.note("layouts", sysName, fmt.Sprintf("envelope %d B for a %d B payload, ids of %d characters; candidates written with plain commands, not through the library",
			len(envs[0]), b.cfg.payload, len(ids[0])))
	}
	if err := b.admin.FlushAll(ctx).Err(); err != nil {
		return nil, err
	}
	return v, nil
}

// Promotion cost of the layouts: the same n messages, all due, promoted to
// a stream in batches of promoteBatch until none is left, on an emptied
// server; Redis CPU (INFO cpu) per promoted message. Plain and packed
// members use the library's promote script; the candidates use the scripts
// below (without lease and quarantine, which cost the same in every layout).
const promoteBatch = 256

// mergedPromote promotes merged members: id and envelope split in Lua.
var mergedPromote = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
local n = #due / 2
for k = 1, n do
  local m = due[2 * k - 1]
  local l = string.byte(m, 1)
  redis.call('XADD', KEYS[2], '*', 'i', string.sub(m, 2, 1 + l), 'd', due[2 * k], 'e', string.sub(m, 2 + l))
end
if n > 0 then
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - 1)
end
return n`)

// mergedIndexPromote is the second phase of a two-phase promotion with an
// id -> due index: the caller read the set's first members (phase one) and
// passes their ids (ARGV[2..]) and, as declared keys, their index buckets
// (KEYS[2+b[k]], ARGV[1+n+k] = b[k]); the script promotes the due prefix
// of the members that still match, and deletes their index entries.
var mergedIndexPromote = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(ARGV[1])
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, n)
local moved = 0
for k = 1, #due / 2 do
  local m = due[2 * k - 1]
  local l = string.byte(m, 1)
  local id = string.sub(m, 2, 1 + l)
  if id ~= ARGV[1 + k] then
    break -- the set changed since phase one: the rest waits for the next call
  end
  redis.call('XADD', KEYS[2], '*', 'i', id, 'd', due[2 * k], 'e', string.sub(m, 2 + l))
  redis.call('HDEL', KEYS[2 + tonumber(ARGV[1 + n + k])], id)
  moved = k
end
if moved > 0 then
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, moved - 1)
end
return moved`)

// promoteCost fills the server with n due messages in layout l and promotes
// them all, returning Redis CPU per promoted message.
func (b *bench) promoteCost(ctx context.Context, l layout, ids []string, envs [][]byte, dues []int64) (float64, error) {
	if err := b.admin.FlushAll(ctx).Err(); err != nil {
		return 0, err
	}
	if err := b.fill(ctx, l, ids, envs, dues); err != nil {
		return 0, err
	}
	// Load the scripts outside the measurement.
	for _, s := range []*redis.Script{scripts.Promote, mergedPromote, mergedIndexPromote} {
		if err := s.Load(ctx, b.admin).Err(); err != nil {
			return 0, err
		}
	}
	s0, err := takeSnap(ctx, b.admin)
	if err != nil {
		return 0, err
	}
	total := 0
	for total < len(ids) {
		var moved int
		var err error
		switch l.key {
		case "layout_current", "layout_packed":
			var v []int64
			v, err = b.admin.EvalSha(ctx, scripts.Promote.Hash(), []string{"z", "m", "s", "q", "l"},
				promoteBatch, "", 1000, string([]byte{wire.Magic, wire.Version})).Int64Slice()
			if err == nil {
				moved = int(v[0] + v[1])
			}
		case "layout_merged":
			var v int64
			v, err = b.admin.EvalSha(ctx, mergedPromote.Hash(), []string{"z", "s"}, promoteBatch).Int64()
			moved = int(v)
		case "layout_merged_index":
			moved, err = b.promoteTwoPhase(ctx)
		default:
			return 0, fmt.Errorf("no promote cost for %s", l.key)
		}
		if err != nil {
			return 0, fmt.Errorf("%s: promote: %w", l.key, err)
		}
		if moved == 0 {
			return 0, fmt.Errorf("%s: promote moved nothing with %d of %d left", l.key, len(ids)-total, len(ids))
		}
		total += moved
	}
	s1, err := takeSnap(ctx, b.admin)
	if err != nil {
		return 0, err
	}
	if n, err := b.admin.XLen(ctx, "s").Result(); err != nil || n != int64(len(ids)) {
		return 0, fmt.Errorf("%s: stream holds %d entries, want %d (%v)", l.key, n, len(ids), err)
	}
	return s0.delta(s1).cpu / float64(len(ids)), nil
}

// promoteTwoPhase runs one two-phase promotion: read the set's first
// members, then promote them with their index buckets declared.
func (b *bench) promoteTwoPhase(ctx context.Context) (int, error) {
	members, err := b.admin.ZRange(ctx, "z", 0, promoteBatch-1).Result()
	if err != nil || len(members) == 0 {
		return 0, err
	}
	keys := []string{"z", "s"}
	slot := map[string]int{}
	args := make([]any, 0, 1+2*len(members))
	args = append(args, len(members))
	bucketOf := make([]int, len(members))
	for k, m := range members {
		id := m[1 : 1+int(m[0])]
		args = append(args, id)
		key := indexBucket(id)
		s, ok := slot[key]
		if !ok {
			s = len(keys) - 1
			slot[key] = s
			keys = append(keys, key)
		}
		bucketOf[k] = s
	}
	for _, s := range bucketOf {
		args = append(args, s)
	}
	v, err := b.admin.EvalSha(ctx, mergedIndexPromote.Hash(), keys, args...).Int64()
	return int(v), err
}
