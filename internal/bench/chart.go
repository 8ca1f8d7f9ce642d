package bench

import (
	"bytes"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
)

// chartBar is one bar of throughputChart.
type chartBar struct {
	value float64
	kind  string // kindCeiling, kindReference or kindJetrelay: the colour
}

var (
	chartBackground = color.RGBA{0xff, 0xff, 0xff, 0xff}
	chartGrid       = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	chartDecade     = color.RGBA{0x99, 0x99, 0x99, 0xff}
	chartColours    = map[string]color.RGBA{
		kindCeiling:   {0x2b, 0x6c, 0xb0, 0xff}, // blue
		kindReference: {0x9a, 0x9a, 0x9a, 0xff}, // grey
		kindJetrelay:  {0x2f, 0x9e, 0x44, 0xff}, // green
	}
)

// throughputChart draws one horizontal bar per value on a log10 scale from
// 1 to the next power of ten above the largest, with a vertical line at
// every power of ten and fainter ones at 2× and 5×. It has no text (the
// standard library has no font): the document's table names the bars, top
// to bottom, and the scale.
func throughputChart(bars []chartBar) ([]byte, float64) {
	const (
		width, left, right = 900, 10, 10
		barH, gap, top     = 26, 10, 12
	)
	peak := 1.0
	for _, b := range bars {
		peak = max(peak, b.value)
	}
	decades := math.Ceil(math.Log10(peak))
	height := top*2 + len(bars)*(barH+gap)
	img := newCanvas(width, height)
	plot := float64(width - left - right)
	x := func(v float64) int {
		if v <= 1 {
			return left
		}
		return left + int(plot*math.Log10(v)/decades)
	}
	vline := func(at int, c color.Color) { fill(img, image.Rect(at, 0, at+1, height), c) }
	for d := 0.0; d <= decades; d++ {
		p := math.Pow(10, d)
		vline(x(p), chartDecade)
		if d < decades {
			vline(x(2*p), chartGrid)
			vline(x(5*p), chartGrid)
		}
	}
	for i, b := range bars {
		y := top + i*(barH+gap)
		fill(img, image.Rect(left, y, max(left+2, x(b.value)), y+barH), chartColours[b.kind])
	}
	return pngBytes(img), math.Pow(10, decades)
}

// newCanvas is a chart's blank image.
func newCanvas(width, height int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	fill(img, img.Bounds(), chartBackground)
	return img
}

// fill paints r in c.
func fill(img *image.RGBA, r image.Rectangle, c color.Color) {
	draw.Draw(img, r, &image.Uniform{c}, image.Point{}, draw.Src)
}

func pngBytes(img image.Image) []byte {
	var out bytes.Buffer
	_ = png.Encode(&out, img) // writing to a bytes.Buffer cannot fail
	return out.Bytes()
}
