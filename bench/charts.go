package bench

import (
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// writeCharts draws throughput.svg (tps against clients, or per strategy
// when one client count ran), wal.svg (WAL bytes per row) and lag.svg
// (replication lag over time during the first workload).
func writeCharts(dir string, res *Results) error {
	charts := map[string]func(*Results) (*plot.Plot, error){
		"throughput.svg": throughputChart,
		"wal.svg":        walChart,
		"lag.svg":        lagChart,
	}
	for name, draw := range charts {
		p, err := draw(res)
		if err != nil {
			return fmt.Errorf("chart %s: %w", name, err)
		}
		if err := p.Save(9*vg.Inch, 5*vg.Inch, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

func throughputChart(res *Results) (*plot.Plot, error) {
	if len(res.Params.Clients) == 1 {
		p, err := groupedBars(res, func(e Entry) float64 { return e.TPS })
		p.Title.Text = fmt.Sprintf("Throughput at %d clients (median tps)", res.Params.Clients[0])
		p.Y.Label.Text = "transactions per second"
		return p, err
	}
	p := plot.New()
	w := res.Params.Workloads[0]
	p.Title.Text = "Throughput against clients: " + w
	p.X.Label.Text, p.Y.Label.Text = "clients", "transactions per second"
	var args []any
	for _, s := range res.Params.Strategies {
		var pts plotter.XYs
		for _, e := range entriesOf(res, w) {
			if e.Strategy == s {
				pts = append(pts, plotter.XY{X: float64(e.Clients), Y: e.TPS})
			}
		}
		args = append(args, s, pts)
	}
	return p, plotutil.AddLinePoints(p, args...)
}

func walChart(res *Results) (*plot.Plot, error) {
	p, err := groupedBars(res, func(e Entry) float64 { return e.WALBytesPerRow })
	p.Title.Text = fmt.Sprintf("WAL bytes per row (median, %d clients)", res.Params.Clients[0])
	p.Y.Label.Text = "bytes of WAL per row written"
	return p, err
}

// groupedBars draws one bar per strategy, grouped by workload, at the
// first client count.
func groupedBars(res *Results, value func(Entry) float64) (*plot.Plot, error) {
	p := plot.New()
	p.Legend.Top = true
	n := len(res.Params.Workloads)
	width := vg.Points(float64(60 / max(n, 1)))
	for i, w := range res.Params.Workloads {
		vals := make(plotter.Values, len(res.Params.Strategies))
		for j, s := range res.Params.Strategies {
			for _, e := range entriesOf(res, w) {
				if e.Strategy == s && e.Clients == res.Params.Clients[0] {
					vals[j] = value(e)
				}
			}
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return p, err
		}
		bars.LineStyle.Width = 0
		bars.Color = plotutil.Color(i)
		bars.Offset = width * vg.Length(float64(i)-float64(n-1)/2)
		p.Add(bars)
		p.Legend.Add(w, bars)
	}
	p.NominalX(res.Params.Strategies...)
	return p, nil
}

func lagChart(res *Results) (*plot.Plot, error) {
	p := plot.New()
	w := res.Params.Workloads[0]
	p.Title.Text = fmt.Sprintf("Replication lag during %s (%d clients, median run)", w, res.Params.Clients[0])
	p.X.Label.Text, p.Y.Label.Text = "seconds since the load started", "MB of WAL not yet confirmed"
	var args []any
	for _, e := range entriesOf(res, w) {
		if e.Lag == nil || e.Clients != res.Params.Clients[0] {
			continue
		}
		pts := make(plotter.XYs, len(e.Lag.Samples))
		for i, s := range e.Lag.Samples {
			pts[i] = plotter.XY{X: s.T, Y: float64(s.Bytes) / (1 << 20)}
		}
		args = append(args, e.Strategy, pts)
	}
	if len(args) == 0 {
		p.Title.Text = "No replication lag measured (run with --with-cdc)"
		return p, nil
	}
	return p, plotutil.AddLines(p, args...)
}
