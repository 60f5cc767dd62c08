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
