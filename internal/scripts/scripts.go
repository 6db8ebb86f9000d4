// Package scripts holds delaystream's Lua scripts, one per state transition,
// embedded from the .lua files beside this one. Each file's header documents
// its KEYS, ARGV and reply.
package scripts

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed ids.lua
	idsSrc string
	//go:embed publish.lua
	publishSrc string
	//go:embed once.lua
	onceSrc string
	//go:embed wake.lua
	wakeSrc string
	//go:embed schedule.lua
	scheduleSrc string
	//go:embed schedule_generated.lua
	scheduleGeneratedSrc string
	//go:embed promote.lua
	promoteSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed cancel.lua
	cancelSrc string
	//go:embed reschedule.lua
	rescheduleSrc string
	//go:embed get.lua
	getSrc string
	//go:embed stats.lua
	statsSrc string
	//go:embed retry.lua
	retrySrc string
	//go:embed dead.lua
	deadSrc string
	//go:embed history.lua
	historySrc string
	//go:embed ack.lua
	ackSrc string
	//go:embed extend.lua
	extendSrc string
	//go:embed trim.lua
	trimSrc string
	//go:embed redrive.lua
	redriveSrc string
	//go:embed delconsumer.lua
	delConsumerSrc string
	//go:embed meta.lua
	metaSrc string
	//go:embed movers.lua
	moversSrc string
	//go:embed recur_define.lua
	recurDefineSrc string
	//go:embed recur_read.lua
	recurReadSrc string
	//go:embed recur_advance.lua
	recurAdvanceSrc string
	//go:embed recur_add.lua
	recurAddSrc string
	//go:embed pause.lua
	pauseSrc string
	//go:embed flow.lua
	flowSrc string
	//go:embed keyrate.lua
	keyRateSrc string
	//go:embed locate.lua
	locateSrc string
	//go:embed envcut.lua
	envCutSrc string
	//go:embed peek_cut.lua
	peekCutSrc string
	//go:embed xrange_cut.lua
	xrangeCutSrc string
)

// The scripts. Those that read or write a delayed set by message id start
// with ids.lua, which defines the two kinds of delayed-set member (plain and
// packed) and the functions that find a message by id. Run them with Script.Run (EVALSHA with EVAL fallback); inside a
// pipeline use [RunPipelined], which loads them first.
var (
	Schedule = newScript("publish.lua", publishSrc, "once.lua", onceSrc, "wake.lua", wakeSrc, "ids.lua", idsSrc, "schedule.lua", scheduleSrc)
	// ScheduleGenerated is Schedule's fast path for calls in which every
	// message has a generated id.
	ScheduleGenerated = newScript("publish.lua", publishSrc, "once.lua", onceSrc, "wake.lua", wakeSrc, "schedule_generated.lua", scheduleGeneratedSrc)
	Promote           = newScript("publish.lua", publishSrc, "ids.lua", idsSrc, "history.lua", historySrc, "promote.lua", promoteSrc)
	Release           = newScript("publish.lua", publishSrc, "release.lua", releaseSrc)
	Cancel            = newScript("once.lua", onceSrc, "ids.lua", idsSrc, "cancel.lua", cancelSrc)
	Reschedule        = newScript("publish.lua", publishSrc, "once.lua", onceSrc, "ids.lua", idsSrc, "reschedule.lua", rescheduleSrc)
	Get               = newScript("ids.lua", idsSrc, "get.lua", getSrc)
	Stats             = newScript("stats.lua", statsSrc)
	// Locate finds every place of a message id in one shard (read only).
	Locate = newScript("ids.lua", idsSrc, "locate.lua", locateSrc)
	// PeekCut and XRangeCut read listings (waiting messages; dead letters
	// and quarantines) with each envelope cut to a bounded prefix, so that
	// a listing of large payloads never carries them whole (read only).
	PeekCut   = newScript("envcut.lua", envCutSrc, "peek_cut.lua", peekCutSrc)
	XRangeCut = newScript("envcut.lua", envCutSrc, "xrange_cut.lua", xrangeCutSrc)

	Retry = newScript("publish.lua", publishSrc, "wake.lua", wakeSrc, "history.lua", historySrc, "retry.lua", retrySrc)
	Dead  = newScript("history.lua", historySrc, "dead.lua", deadSrc)
	// Ack acknowledges a group's entries of one stream and counts them in
	// the queue's history.
	Ack         = newScript("history.lua", historySrc, "ack.lua", ackSrc)
	Extend      = newScript("extend.lua", extendSrc)
	Trim        = newScript("trim.lua", trimSrc)
	Redrive     = newScript("publish.lua", publishSrc, "redrive.lua", redriveSrc)
	DelConsumer = newScript("delconsumer.lua", delConsumerSrc)
	Meta        = newScript("meta.lua", metaSrc)
	// Movers keeps the registry of a sharded queue's live movers.
	Movers = newScript("movers.lua", moversSrc)

	// The scripts of recurring schedules.
	RecurDefine  = newScript("recur_define.lua", recurDefineSrc)
	RecurRead    = newScript("recur_read.lua", recurReadSrc)
	RecurAdvance = newScript("recur_advance.lua", recurAdvanceSrc)
	RecurAdd     = newScript("publish.lua", publishSrc, "recur_add.lua", recurAddSrc)
	// Pause sets or clears a field of a shard's pause record.
	Pause = newScript("publish.lua", publishSrc, "pause.lua", pauseSrc)
	// Flow grants a limited group's consumer concurrency slots and rate
	// permits.
	Flow = newScript("publish.lua", publishSrc, "flow.lua", flowSrc)
	// KeyRate takes a permit of a group's per-key rate limit for a message.
	KeyRate = newScript("keyrate.lua", keyRateSrc)
)

// newScript returns the script made of the files given as name, source
// pairs, in order, and records them for [Explain]. Every file ends with a
// newline, so line n of the script is a line of one file.
func newScript(files ...string) *redis.Script {
	var src strings.Builder
	parts := make([]part, 0, len(files)/2)
	for i := 0; i < len(files); i += 2 {
		src.WriteString(files[i+1])
		parts = append(parts, part{name: files[i], lines: strings.Split(strings.TrimSuffix(files[i+1], "\n"), "\n")})
	}
	return register(redis.NewScript(src.String()), parts...)
}

// WakeHorizon is how far ahead of its script call (a schedule, a
// handler's retry) a message must be due for the call to spare the head
// check and the wake-up (WAKE_HORIZON_MS in wake.lua): a mover looks at
// the head of every lane it owns at least once a minute, so it finds such
// a message before it is due.
const WakeHorizon = 90 * time.Second

// Channel returns the script argument that names a lane's pub/sub channel:
// the name itself, or, for a shard channel (a sharded queue's lanes, see
// stream.Lane.Sharded), the name after a space, which publish.lua sends
// with SPUBLISH. "" stays "" (publish nothing).
func Channel(name string, shard bool) string {
	if !shard || name == "" {
		return name
	}
	return " " + name
}

// Call is one invocation of a script in a pipeline.
type Call struct {
	Keys []string // the script's KEYS
	Args []any    // the script's ARGV
}

// RunPipelined runs s once per call in a single pipeline (a single call is
// sent on its own) and returns the replies in order. EVALSHA does not fall back to EVAL inside a pipeline, so
// calls answered with NOSCRIPT (script cache flushed, or a Cluster node that
// never saw the script) are retried one by one with Run, which loads the
// script; a NOSCRIPT reply means the call did not run, so the retry is safe.
// The error of each reply is in its Cmd; the returned error reports only a
// failure to send the pipeline at all.
func RunPipelined(ctx context.Context, rdb redis.UniversalClient, s *redis.Script, calls []Call) ([]*redis.Cmd, error) {
	if len(calls) == 1 { // the common single Schedule: no pipeline to build
		cmd := s.Run(ctx, rdb, calls[0].Keys, calls[0].Args...)
		if err := cmd.Err(); err != nil {
			cmd.SetErr(Explain(err))
		}
		return []*redis.Cmd{cmd}, nil
	}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = s.EvalSha(ctx, pipe, c.Keys, c.Args...)
	}
	if _, err := pipe.Exec(ctx); err != nil && ctx.Err() != nil {
		return cmds, fmt.Errorf("pipeline: %w", err)
	}
	for i, c := range calls {
		if redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
			cmds[i] = s.Run(ctx, rdb, c.Keys, c.Args...)
		}
		if err := cmds[i].Err(); err != nil {
			cmds[i].SetErr(Explain(err))
		}
	}
	return cmds, nil
}

// Ints converts a script's array reply of integers.
func Ints(v any) ([]int64, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("delaystream: script reply: want array, got %T", v)
	}
	out := make([]int64, len(arr))
	for i, x := range arr {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("delaystream: script reply item %d: want integer, got %T", i, x)
		}
		out[i] = n
	}
	return out, nil
}
