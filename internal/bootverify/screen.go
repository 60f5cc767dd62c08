package bootverify

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
)

// screenColours counts the distinct colours of a PNG screenshot, up to
// limit: a screen of one colour (black, a blue screen without text) shows
// nothing booted, whatever colour it is.
func screenColours(b []byte, limit int) (image.Rectangle, int, error) {
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return image.Rectangle{}, 0, fmt.Errorf("screenshot: %w", err)
	}
	seen := map[[4]uint32]bool{}
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			r, g, b, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, b, a}] = true
			if len(seen) >= limit {
				return bd, len(seen), nil
			}
		}
	}
	return bd, len(seen), nil
}

// ReviewThreshold is the share of the screen's brightness that must
// differ from the last verified screenshot for a verification to be
// flagged for review: a text console that printed other lines differs by
// a few percent, a different screen (an installer, a rescue shell on
// another background, a graphical error) by far more.
const ReviewThreshold = 0.25

// screenGrid is how finely two screenshots are compared: coarse enough
// that moved text and different resolutions do not count, fine enough
// that a different screen does.
const screenGridW, screenGridH = 64, 48

// screenDifference is the mean difference in brightness, 0 to 1, of two
// PNG screenshots sampled on the same grid over their whole areas, so
// that screens of different resolutions compare.
func screenDifference(a, b []byte) (float64, error) {
	ga, err := brightnessGrid(a)
	if err != nil {
		return 0, err
	}
	gb, err := brightnessGrid(b)
	if err != nil {
		return 0, fmt.Errorf("the last verified screenshot: %w", err)
	}
	var sum float64
	for i := range ga {
		d := ga[i] - gb[i]
		if d < 0 {
			d = -d
		}
		sum += d
	}
	return sum / float64(len(ga)), nil
}

// brightnessGrid samples a PNG's brightness (0 to 1) at the centre of
// each cell of the comparison grid.
func brightnessGrid(b []byte) ([]float64, error) {
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("screenshot: %w", err)
	}
	bd := img.Bounds()
	if bd.Empty() {
		return nil, fmt.Errorf("screenshot: empty image")
	}
	out := make([]float64, 0, screenGridW*screenGridH)
	for gy := range screenGridH {
		for gx := range screenGridW {
			x := bd.Min.X + (2*gx+1)*bd.Dx()/(2*screenGridW)
			y := bd.Min.Y + (2*gy+1)*bd.Dy()/(2*screenGridH)
			r, g, b, _ := img.At(x, y).RGBA()
			out = append(out, (0.299*float64(r)+0.587*float64(g)+0.114*float64(b))/0xffff)
		}
	}
	return out, nil
}

func shortID(s string) string { return s[:min(8, len(s))] }
