package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/spf13/cobra"

	"github.com/delaystream/delaystream/admin"
)

func (a *app) watchCmd() *cobra.Command {
	var (
		interval    time.Duration
		plain, once bool
	)
	c := &cobra.Command{
		Use:   "watch [queue...]",
		Short: "Live view of every queue (or the ones named): depth, overdue, lag, pending, dead letters; q quits",
		Long: `watch shows every queue (or the ones named), refreshed every --interval: a full-screen view on a
terminal (q quits, r refreshes); without a terminal, or with --plain, a plain table per refresh
(one with --once), for logs and scripts.`,
		RunE: func(c *cobra.Command, args []string) error {
			if interval < 100*time.Millisecond {
				return usagef("--interval must be at least 100ms")
			}
			in, err := a.inspector()
			if err != nil {
				return err
			}
			if plain || once || !a.terminal() || !isTerminal(a.stdout) {
				return a.watchPlain(ctxOf(c), in, args, interval, once)
			}
			m := &watchModel{ctx: ctxOf(c), in: in, prefix: a.prefix, queues: args, interval: interval, width: 100}
			p := tea.NewProgram(m, tea.WithContext(ctxOf(c)), tea.WithInput(a.stdin), tea.WithOutput(a.stdout), tea.WithAltScreen())
			_, err = p.Run()
			if err != nil && ctxOf(c).Err() != nil {
				return nil // interrupted: a requested stop
			}
			return err
		},
	}
	c.Flags().DurationVar(&interval, "interval", time.Second, "refresh interval")
	c.Flags().BoolVar(&plain, "plain", false, "print a plain table per refresh instead of the full-screen view (the default without a terminal)")
	c.Flags().BoolVar(&once, "once", false, "print one plain table and exit")
	return c
}

// watchModel is the bubbletea model of `watch`.
type watchModel struct {
	ctx      context.Context
	in       *admin.Operator
	prefix   string
	queues   []string // the queues to show; all when empty
	interval time.Duration

	stats   []admin.QueueReport
	hist    histories // refreshed every histEvery
	err     error
	updated time.Time
	took    time.Duration
	width   int
	loading bool
}

type statsMsg struct {
	stats []admin.QueueReport
	hist  histories // nil: not read this time
	err   error
	took  time.Duration
	at    time.Time
}

type tickMsg struct{}

func (m *watchModel) Init() tea.Cmd { return m.fetch() }

// fetch reads the figures in the background.
func (m *watchModel) fetch() tea.Cmd {
	m.loading = true
	stale := m.hist.stale()
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
		defer cancel()
		start := time.Now()
		sts, err := m.in.Stats(ctx, m.queues...) // every queue when none is named
		var h histories
		if err == nil && stale {
			h = readHistories(ctx, m.in, sts)
		}
		return statsMsg{stats: sts, hist: h, err: err, took: time.Since(start), at: time.Now()}
	}
}

func (m *watchModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyMsg:
		switch msg.String() {
		case "q", "ctrl+c", "esc":
			return m, tea.Quit
		case "r":
			if !m.loading {
				return m, m.fetch()
			}
		}
	case tea.WindowSizeMsg:
		m.width = msg.Width
	case statsMsg:
		m.loading = false
		m.err, m.took, m.updated = msg.err, msg.took, msg.at
		if msg.err == nil {
			m.stats = msg.stats
		}
		if msg.hist.read != nil {
			m.hist = msg.hist
		}
		return m, tea.Tick(m.interval, func(time.Time) tea.Msg { return tickMsg{} })
	case tickMsg:
		if !m.loading {
			return m, m.fetch()
		}
	}
	return m, nil
}

var (
	styleTitle = lipgloss.NewStyle().Bold(true)
	styleHead  = lipgloss.NewStyle().Bold(true).Underline(true)
	styleBad   = lipgloss.NewStyle().Foreground(lipgloss.Color("9")).Bold(true)
	styleWarn  = lipgloss.NewStyle().Foreground(lipgloss.Color("11"))
	styleDim   = lipgloss.NewStyle().Faint(true)
	styleBar   = lipgloss.NewStyle().Foreground(lipgloss.Color("12"))
)

// barWidth is the width of the depth and lag bars.
const barWidth = 20

// bar renders v against the largest value shown, as a bar of barWidth.
func bar(v, top int64) string {
	if top <= 0 || v <= 0 {
		return strings.Repeat("·", barWidth)
	}
	n := int((v*barWidth + top - 1) / top)
	n = min(max(n, 1), barWidth)
	return styleBar.Render(strings.Repeat("█", n)) + strings.Repeat("·", barWidth-n)
}

func (m *watchModel) View() string {
	var b strings.Builder
	b.WriteString(styleTitle.Render("delaystream watch") + "  prefix " + m.prefix)
	if !m.updated.IsZero() {
		fmt.Fprintf(&b, "  updated %s (%s)", m.updated.Format("15:04:05"), roundDur(m.took))
	}
	b.WriteString("\n")
	if m.err != nil {
		b.WriteString(styleBad.Render("error: "+m.err.Error()) + "\n")
	}
	if m.stats == nil {
		b.WriteString("\nreading...\n")
		return b.String()
	}
	if len(m.stats) == 0 {
		b.WriteString("\nno queues under this prefix\n")
	}
	var topWait, topLag int64
	for _, s := range m.stats {
		topWait = max(topWait, s.Waiting, s.StreamLength)
		for _, g := range s.Groups {
			topLag = max(topLag, g.Lag, g.Pending)
		}
	}
	for _, s := range m.stats {
		b.WriteString("\n")
		h, counted := m.hist.read[s.Queue]
		fmt.Fprintf(&b, "%s  %d shard%s  quarantined %s", styleTitle.Render("queue "+s.Queue), s.Shards, plural(s.Shards), count(s.Quarantined, styleWarn))
		if counted {
			fmt.Fprintf(&b, "  promoted %d last minute, %d last hour", h.LastMinute.Promoted, h.LastHour.Promoted)
		}
		b.WriteString("\n")
		if !s.PausedSince.IsZero() {
			b.WriteString("  " + styleWarn.Render("PAUSED since "+when(s.PausedSince, s.Now)+": nothing is promoted") + "\n")
		}
		fmt.Fprintf(&b, "  waiting %8d %s  next due %s\n", s.Waiting, bar(s.Waiting, topWait), when(s.NextDue, s.Now))
		overdue := fmt.Sprintf("%8d", s.Overdue)
		if s.Overdue > 0 {
			overdue = styleBad.Render(overdue) + styleBad.Render(fmt.Sprintf("  oldest due %s ago", roundDur(s.OverdueBy())))
		}
		fmt.Fprintf(&b, "  overdue %s\n", overdue)
		fmt.Fprintf(&b, "  stream  %8d %s\n", s.StreamLength, bar(s.StreamLength, topWait))
		if len(s.Groups) == 0 {
			b.WriteString(styleDim.Render("  no consumer groups yet") + "\n")
			continue
		}
		fmt.Fprintf(&b, "  %s\n", styleHead.Render(fmt.Sprintf("%-16s %5s %8s %-*s %8s %-14s %6s %6s %9s %9s %-6s",
			"GROUP", "CONS", "LAG", barWidth, "", "PENDING", "OLDEST PENDING", "RETRY", "DEAD", "DONE/MIN", "FAIL/MIN", "")))
		groups := slices.Clone(s.Groups)
		for _, g := range groups {
			oldest := fmt.Sprintf("%-14s", age(g.OldestPendingEntryAgeMs))
			if g.OldestPendingEntryAgeMs > 30_000 {
				oldest = styleBad.Render(oldest)
			}
			done, failed := "-", "-"
			if counted {
				c := h.LastMinute.Groups[g.Group]
				done, failed = fmt.Sprint(c.Handled+c.Dropped), fmt.Sprint(c.Failed())
			}
			state := ""
			if !g.PausedSince.IsZero() {
				state = styleWarn.Render("PAUSED")
			}
			fmt.Fprintf(&b, "  %-16s %5d %8s %s %8d %s %6d %6s %9s %9s %s\n", g.Group, g.Consumers, lag(g.Lag), bar(max(g.Lag, 0), topLag),
				g.Pending, oldest, g.RetryWaiting, count(g.DeadLetters, styleBad), done, failed, state)
		}
	}
	b.WriteString("\n" + styleDim.Render("q quit · r refresh · every "+m.interval.String()) + "\n")
	return b.String()
}

// count renders n, in style when it is not zero.
func count(n int64, style lipgloss.Style) string {
	s := fmt.Sprintf("%6d", n)
	if n > 0 {
		return style.Render(s)
	}
	return s
}

// histEvery is how often watch reads the queues' history: its figures per
// minute change once a minute.
const histEvery = 10 * time.Second

// histories are the queues' history, by queue, as last read.
type histories struct {
	read map[string]admin.History
	at   time.Time
}

// stale reports whether h should be read again.
func (h histories) stale() bool { return h.read == nil || time.Since(h.at) >= histEvery }

// readHistories reads the history of each queue of rs; a queue whose
// history cannot be read is left out (its columns show "-").
func readHistories(ctx context.Context, in *admin.Operator, rs []admin.QueueReport) histories {
	h := histories{read: make(map[string]admin.History, len(rs)), at: time.Now()}
	for _, r := range rs {
		if v, err := in.History(ctx, r.Queue); err == nil {
			h.read[r.Queue] = v
		}
	}
	return h
}
