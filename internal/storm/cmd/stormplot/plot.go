package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/tetherproxy/tether/internal/storm"
)

// Plot geometry: one panel per scenario, stacked, then a legend strip shared
// by all panels (same strategies, same colours), sized for docs/performance.md.
const (
	plotWidth    = 11 * vg.Inch
	panelHeight  = 4.2 * vg.Inch
	legendHeight = 0.95 * vg.Inch
	plotDPI      = 96
)

// The y axis is logarithmic so that a 50,000/s spike and a 300/s tail are
// both readable. Values are plotted as log10(n) on a linear axis with
// labelled decade ticks, rather than with plot.LogScale, whose centred axis
// label is padded as if the scale were linear and leaves a blank band above
// the data. An empty bucket is drawn at floorY, below the axis minimum of
// log10(1) = 0, so the line drops out of the panel.
const floorY = -0.5

var (
	capacityColor = color.Gray{Y: 96}
	outageColor   = color.Gray{Y: 150}
	capacityDash  = []vg.Length{vg.Points(6), vg.Points(4)}
	outageDash    = []vg.Length{vg.Points(2), vg.Points(3)}
)

// writePlot draws arrivals per second over time, one line per strategy, one
// panel per scenario, and writes a PNG.
func writePlot(path string, cfg storm.Config, scenarios []storm.Scenario, results []storm.Result, xmax time.Duration) error {
	ymax := yMax(results)
	plots := make([][]*plot.Plot, len(scenarios))
	var lines []*plotter.Line // of the first panel, for the shared legend
	for i, sc := range scenarios {
		p, ls, err := panel(cfg, sc, byScenario(results, sc.Name), xmax, ymax)
		if err != nil {
			return err
		}
		plots[i] = []*plot.Plot{p}
		if i == 0 {
			lines = ls
		}
	}
	height := panelHeight*vg.Length(len(plots)) + legendHeight
	img := vgimg.NewWith(vgimg.UseWH(plotWidth, height), vgimg.UseDPI(plotDPI), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	panels := draw.Crop(dc, 0, 0, legendHeight, 0)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Points(12), PadTop: vg.Points(6),
		PadLeft: vg.Points(6), PadRight: vg.Points(14)}
	canvases := plot.Align(plots, tiles, panels)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	if err := drawLegend(draw.Crop(dc, 0, 0, 0, legendHeight-height), cfg, results, lines); err != nil {
		return err
	}
	return savePNG(path, img)
}

func savePNG(path string, img *vgimg.Canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// panel is one scenario: a step line per strategy, the server's capacity
// and the moment it listens again. It returns the strategy lines in order.
func panel(cfg storm.Config, sc storm.Scenario, results []storm.Result, xmax time.Duration, ymax float64) (*plot.Plot, []*plotter.Line, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %s sidecars, the server completes %s handshakes/s and answers the excess with 503",
		sc.Name, thousands(cfg.Clients), thousands(cfg.Capacity))
	p.X.Label.Text = "seconds since the upstream was lost (1 s buckets)"
	p.Y.Label.Text = "handshakes reaching the server per second"
	p.Y.Tick.Marker = decadeTicks(ymax)
	p.Add(plotter.NewGrid())
	var lines []*plotter.Line
	for i, r := range results {
		l, err := arrivalsLine(r, i)
		if err != nil {
			return nil, nil, err
		}
		p.Add(l)
		lines = append(lines, l)
	}
	if err := addMarkers(p, cfg, sc, ymax); err != nil {
		return nil, nil, err
	}
	p.X.Min, p.X.Max = 0, xmax.Seconds()
	p.Y.Min, p.Y.Max = 0, ymax
	return p, lines, nil
}

// arrivalsLine is a post-step line: bucket i holds from i s to i+1 s.
func arrivalsLine(r storm.Result, i int) (*plotter.Line, error) {
	// One point past the last bucket closes the final step.
	xys := make(plotter.XYs, len(r.Arrivals)+1)
	for s := range xys {
		xys[s] = plotter.XY{X: float64(s), Y: floorY}
		if s < len(r.Arrivals) && r.Arrivals[s] > 0 {
			xys[s].Y = math.Log10(float64(r.Arrivals[s]))
		}
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return nil, err
	}
	l.StepStyle = plotter.PostStep
	l.Color = plotutil.Color(i)
	l.Width = vg.Points(1.2)
	if r.TetherDefault {
		l.Width = vg.Points(2.6)
	}
	return l, nil
}

// addMarkers draws the capacity as a dashed horizontal line and the end of
// the outage as a dotted vertical one.
func addMarkers(p *plot.Plot, cfg storm.Config, sc storm.Scenario, ymax float64) error {
	c := math.Log10(float64(cfg.Capacity))
	capLine, err := plotter.NewLine(plotter.XYs{{X: 0, Y: c}, {X: 1e6, Y: c}})
	if err != nil {
		return err
	}
	capLine.Color, capLine.Dashes = capacityColor, capacityDash
	up, err := plotter.NewLine(plotter.XYs{{X: sc.Outage.Seconds(), Y: floorY}, {X: sc.Outage.Seconds(), Y: ymax}})
	if err != nil {
		return err
	}
	up.Color, up.Dashes = outageColor, outageDash
	p.Add(capLine, up)
	return nil
}

// drawLegend writes the strategies in the left half of c and the markers in
// the right half. Peaks are in the table, not here: they differ per panel.
func drawLegend(c draw.Canvas, cfg storm.Config, results []storm.Result, lines []*plotter.Line) error {
	strategies := newLegend()
	for i, l := range lines {
		strategies.Add(results[i].Strategy, l)
	}
	half := (c.Max.X - c.Min.X) / 2
	strategies.Draw(draw.Crop(c, vg.Points(60), -half, 0, -vg.Points(4)))
	capLine, err := plotter.NewLine(plotter.XYs{{}, {X: 1}})
	if err != nil {
		return err
	}
	capLine.Color, capLine.Dashes = capacityColor, capacityDash
	up, err := plotter.NewLine(plotter.XYs{{}, {X: 1}})
	if err != nil {
		return err
	}
	up.Color, up.Dashes = outageColor, outageDash
	markers := newLegend()
	markers.Add(fmt.Sprintf("server capacity: %s completed handshakes per second", thousands(cfg.Capacity)), capLine)
	markers.Add("server listening again (end of the outage or restart)", up)
	markers.Add("empty buckets drop below the axis (log scale)")
	markers.Draw(draw.Crop(c, half, 0, 0, -vg.Points(4)))
	return nil
}

func newLegend() plot.Legend {
	l := plot.NewLegend()
	l.Top, l.Left = true, true
	l.TextStyle.Font.Size = vg.Points(10)
	l.ThumbnailWidth = vg.Points(28)
	return l
}

// yMax is log10 of the decade above the highest peak, shared by all panels
// so that they compare at a glance.
func yMax(results []storm.Result) float64 {
	peak := 1
	for _, r := range results {
		peak = max(peak, r.Peak)
	}
	return math.Ceil(math.Log10(float64(peak) * 1.01))
}

// decadeTicks labels 1, 10, 100, ... up to 10^top and marks 2..9 times each
// decade as minor ticks, on the log10 axis.
func decadeTicks(top float64) plot.ConstantTicks {
	var ticks plot.ConstantTicks
	for d := 0; float64(d) <= top; d++ {
		v := math.Pow10(d)
		ticks = append(ticks, plot.Tick{Value: float64(d), Label: thousands(int(v))})
		for k := 2; k <= 9 && float64(d) < top; k++ {
			ticks = append(ticks, plot.Tick{Value: math.Log10(float64(k) * v)})
		}
	}
	return ticks
}

func byScenario(results []storm.Result, name string) []storm.Result {
	var out []storm.Result
	for _, r := range results {
		if r.Scenario == name {
			out = append(out, r)
		}
	}
	return out
}

// thousands formats a count with comma separators.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
