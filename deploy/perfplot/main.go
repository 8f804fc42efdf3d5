// Command perfplot draws the knee of deploy/perf.sh: commit-to-visible p99
// against the rows/s ferry sustained, one line per ClickHouse server, from
// the knee files the harness writes (docs/perf-knee-<leg>.tsv), with the
// 1 s line that defines the knee.
//
// A knee file has a first line "# <label>" (the line's name in the
// legend) and then one tab-separated row per offered rate: offered rows/s,
// achieved rows/s, p50 ms, p99 ms, max ms.
//
// deploy/perf.sh runs it; it is a benchmark tool, not part of ferry.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

func main() {
	out := flag.String("out", "docs/perf-knee.svg", "the SVG to write")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "perfplot: name one knee file or more")
		os.Exit(2)
	}
	if err := draw(*out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "perfplot:", err)
		os.Exit(1)
	}
}

// series is one knee file: its label and its points (achieved rows/s, p99 ms).
type series struct {
	label string
	pts   plotter.XYs
}

func draw(out string, files []string) error {
	p := plot.New()
	p.Title.Text = "ferry's commit-to-visible p99 against the rows/s it sustained"
	p.X.Label.Text = "rows/s written and sustained (100-row transactions and up)"
	p.Y.Label.Text = "p99 commit to visible in ClickHouse, ms (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = msTicks{}
	p.X.Tick.Marker = rateTicks{}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(70), -vg.Points(20)
	var args []any
	maxX := 0.0
	for _, f := range files {
		s, err := readKnee(f)
		if err != nil {
			return err
		}
		for _, pt := range s.pts {
			maxX = max(maxX, pt.X)
		}
		args = append(args, s.label, s.pts)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	limit, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 1000}, {X: maxX * 1.05, Y: 1000}})
	if err != nil {
		return err
	}
	limit.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
	p.Add(limit)
	p.Legend.Add("1 s: the knee is the highest rate below it", limit)
	return p.Save(9*vg.Inch, 5*vg.Inch, out)
}

// msTicks marks 1, 2 and 5 of every power of ten, for a log scale in ms.
type msTicks struct{}

func (msTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for p := 1.0; p <= hi*10; p *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := p * m; v >= lo && v <= hi {
				ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
			}
		}
	}
	return ts
}

// rateTicks marks rows/s in thousands.
type rateTicks struct{}

func (rateTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 10000.0
	for (hi-lo)/step > 10 {
		step *= 2
	}
	var ts []plot.Tick
	for v := 0.0; v <= hi; v += step {
		if v >= lo {
			ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v/1000, 'f', -1, 64) + "k"})
		}
	}
	return ts
}

func readKnee(path string) (series, error) {
	f, err := os.Open(path)
	if err != nil {
		return series{}, err
	}
	defer f.Close()
	s := series{label: path}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if label, ok := strings.CutPrefix(line, "#"); ok {
			s.label = strings.TrimSpace(label)
			continue
		}
		if line == "" {
			continue
		}
		fields := strings.Split(line, "\t")
		if len(fields) < 4 {
			return series{}, fmt.Errorf("%s:%d: want offered, achieved, p50, p99 and max, tab-separated", path, n)
		}
		x, errX := strconv.ParseFloat(fields[1], 64)
		y, errY := strconv.ParseFloat(fields[3], 64)
		if err := errors.Join(errX, errY); err != nil {
			return series{}, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		s.pts = append(s.pts, plotter.XY{X: x, Y: max(y, 1)}) // the log scale starts above 0
	}
	if err := sc.Err(); err != nil {
		return series{}, err
	}
	if len(s.pts) == 0 {
		return series{}, fmt.Errorf("%s: no rates", path)
	}
	return s, nil
}
