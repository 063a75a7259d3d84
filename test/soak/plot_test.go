package soak

// The leader's memory over the run as a small SVG line chart, for the README beside the
// report's table (no plotting library: a polyline, its axes and their labels).

import (
	"fmt"
	"math"
	"strings"
)

// plotSVG draws ys (MiB) over xs (seconds) as a line chart of w x h pixels, titled.
func plotSVG(title string, xs, ys []float64, w, h int) string {
	const left, right, top, bottom = 48, 12, 24, 28
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="15">%s</text>`+"\n", left, escapeXML(title))
	if len(xs) == 0 || len(xs) != len(ys) {
		b.WriteString("</svg>\n")
		return b.String()
	}
	x0, x1 := xs[0], xs[len(xs)-1]
	if x1 <= x0 {
		x1 = x0 + 1
	}
	y1 := 0.0
	for _, y := range ys {
		y1 = math.Max(y1, y)
	}
	y1 = math.Ceil(y1/10)*10 + 10 // from 0, so growth reads at its true size
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	px := func(x float64) float64 { return left + (x-x0)/(x1-x0)*pw }
	py := func(y float64) float64 { return float64(top) + ph - y/y1*ph }
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top, left, h-bottom)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, h-bottom, w-right, h-bottom)
	for i := 0; i <= 4; i++ {
		y := y1 * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.0f</text>`+"\n", left-4, py(y)+4, y)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, py(y), w-right, py(y))
	}
	for i := 0; i <= 4; i++ {
		x := x0 + (x1-x0)*float64(i)/4
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.0f min</text>`+"\n", px(x), h-bottom+16, x/60)
	}
	pts := make([]string, len(xs))
	for i := range xs {
		pts[i] = fmt.Sprintf("%.1f,%.1f", px(xs[i]), py(ys[i]))
	}
	fmt.Fprintf(&b, `<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="%s"/>`+"\n", strings.Join(pts, " "))
	b.WriteString("</svg>\n")
	return b.String()
}

func escapeXML(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
