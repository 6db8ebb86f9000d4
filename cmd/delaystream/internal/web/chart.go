package web

import (
	"strconv"
	"strings"
	"time"
)

// Chart geometry, in SVG user units; the SVG scales to its container.
const (
	chartW      = 720
	chartH      = 180
	chartLeft   = 48 // room for the y labels
	chartRight  = 8
	chartTop    = 10
	chartBottom = 24 // room for the x labels
)

// chart is the data of the "waiting / overdue over time" SVG, computed
// here so that the template only places it.
type chart struct {
	W, H        int
	Left, Top   int
	Right       int // x of the plot's right edge
	Bottom      int // y of the plot's bottom edge
	Waiting     string
	Overdue     string
	YMax        int64
	YMid        int64
	YMidAt      int
	From, To    string // x labels
	Samples     int
	Empty       bool
	LastWaiting int64
	LastOverdue int64
}

// newChart lays out samples (oldest first) as two polylines.
func newChart(samples []Sample) chart {
	c := chart{W: chartW, H: chartH, Left: chartLeft, Top: chartTop,
		Right: chartW - chartRight, Bottom: chartH - chartBottom, Samples: len(samples)}
	c.YMidAt = (c.Top + c.Bottom) / 2
	if len(samples) == 0 {
		c.Empty = true
		return c
	}
	last := samples[len(samples)-1]
	c.LastWaiting, c.LastOverdue = last.Waiting, last.Overdue
	var top int64
	for _, s := range samples {
		top = max(top, s.Waiting, s.Overdue)
	}
	c.YMax = niceCeil(top)
	c.YMid = c.YMax / 2
	c.YMidAt = c.Bottom - int(float64(c.Bottom-c.Top)*float64(c.YMid)/float64(c.YMax))
	t0, t1 := samples[0].At, last.At
	span := t1.Sub(t0)
	x := func(i int, t time.Time) float64 {
		w := float64(c.Right - c.Left)
		if span <= 0 {
			if len(samples) == 1 {
				return float64(c.Right)
			}
			return float64(c.Left) + w*float64(i)/float64(len(samples)-1)
		}
		return float64(c.Left) + w*float64(t.Sub(t0))/float64(span)
	}
	y := func(v int64) float64 {
		h := float64(c.Bottom - c.Top)
		return float64(c.Bottom) - h*float64(v)/float64(c.YMax)
	}
	var w, o strings.Builder
	for i, s := range samples {
		if i > 0 {
			w.WriteByte(' ')
			o.WriteByte(' ')
		}
		xs := fmt1(x(i, s.At))
		w.WriteString(xs + "," + fmt1(y(s.Waiting)))
		o.WriteString(xs + "," + fmt1(y(s.Overdue)))
	}
	if len(samples) == 1 { // one point: draw a short flat line ending at it
		w.WriteString(" " + fmt1(float64(c.Right)-2) + "," + fmt1(y(last.Waiting)))
		o.WriteString(" " + fmt1(float64(c.Right)-2) + "," + fmt1(y(last.Overdue)))
	}
	c.Waiting, c.Overdue = w.String(), o.String()
	c.From, c.To = t0.UTC().Format("15:04:05"), t1.UTC().Format("15:04:05")
	return c
}

func fmt1(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (at least 1), so
// that the axis labels are round numbers.
func niceCeil(v int64) int64 {
	if v <= 1 {
		return 1
	}
	p := int64(1)
	for {
		for _, m := range []int64{1, 2, 5} {
			if m*p >= v {
				return m * p
			}
		}
		p *= 10
	}
}
