package bootverify

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"testing"
)

// screen draws a w×h screen of bg with a light "line of text" of n
// character cells at row (8×16 cells, the VGA text font's size).
func screen(t *testing.T, w, h int, bg color.Gray, row, n int) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = bg.Y
	}
	for x := 0; x < n*8 && x < w; x++ {
		for y := row * 16; y < row*16+12 && y < h; y++ {
			if x%8 < 6 {
				img.SetGray(x, y, color.Gray{Y: 0xc0})
			}
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestScreenDifference(t *testing.T) {
	black, white := color.Gray{}, color.Gray{Y: 0xff}
	login := screen(t, 720, 400, black, 20, 20)
	for _, c := range []struct {
		name     string
		a, b     []byte
		min, max float64
	}{
		{"the same screen", login, login, 0, 0},
		{"the same screen at another resolution", screen(t, 640, 480, black, 0, 0), screen(t, 1024, 768, black, 0, 0), 0, 0},
		{"other lines of console text", login, screen(t, 720, 400, black, 3, 80), 0, ReviewThreshold},
		{"a white screen instead of the console", login, screen(t, 720, 400, white, 0, 0), 0.9, 1},
	} {
		d, err := screenDifference(c.a, c.b)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if d < c.min || d > c.max {
			t.Errorf("%s: difference %.3f, want %.2f to %.2f", c.name, d, c.min, c.max)
		}
	}
	if _, err := screenDifference(login, []byte("not a png")); err == nil {
		t.Fatal("a damaged reference compared")
	}
}
