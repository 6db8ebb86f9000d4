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
	"github.com/delaystream/delaystream/delay"
)

// The layouts scenario measures Redis memory per waiting message for the
// library's key layout and for candidate layouts that would change it. The
// candidates are written with plain commands, not through the library: they
// are what a layout change would store, measured on the same server with
// the same ids (delay.NewID ULIDs) and envelopes (codec.MarshalEnvelope of
// the bench payload), so the memory target's floor is shown with figures.

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
	{"layout_current", "layout 1 (now): zset id -> due + hash id -> envelope", func(p redis.Pipeliner, ids []string, envs [][]byte, dues []int64) {
		z := make([]redis.Z, len(ids))
		h := make([]any, 0, 2*len(ids))
		for i, id := range ids {
			z[i] = redis.Z{Score: float64(dues[i]), Member: id}
			h = append(h, id, envs[i])
		}
		p.ZAdd(context.Background(), "z", z...)
		p.HSet(context.Background(), "m", h...)
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

// writeIndex writes id -> due into layoutIndexBuckets hashes chosen by an
// FNV-1a hash of the id.
func writeIndex(p redis.Pipeliner, ids []string, dues []int64) {
	byBucket := map[uint32][]any{}
	for i, id := range ids {
		h := fnv.New32a()
		_, _ = h.Write([]byte(id))
		b := h.Sum32() % layoutIndexBuckets
		byBucket[b] = append(byBucket[b], id, dues[i])
	}
	for b, fv := range byBucket {
		p.HSet(context.Background(), "i:"+strconv.FormatUint(uint64(b), 10), fv...)
	}
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
		envs[i] = codec.MarshalEnvelope(&codec.Envelope{
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
		const chunk = 1000
		for i := 0; i < n; i += chunk {
			j := min(i+chunk, n)
			p := b.admin.Pipeline()
			l.write(p, ids[i:j], envs[i:j], dues[i:j])
			if _, err := p.Exec(ctx); err != nil {
				return nil, fmt.Errorf("%s: %w", l.key, err)
			}
		}
		time.Sleep(100 * time.Millisecond)
		s1, err := takeSnap(ctx, b.admin)
		if err != nil {
			return nil, err
		}
		v[l.key] = float64(s1.mem-s0.mem) / float64(n)
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
