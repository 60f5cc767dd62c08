package actions

import (
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// A media library's cartridges by hand, on the Media page: label one into
// a pool (media-label, as `coffer media label`: a copy labels blank
// cartridges itself, this labels one ahead or relabels an expired one),
// and rebuild the media catalogue from what the library's volumes say
// (rebuild-media-catalog, as `coffer media catalog`: after the catalog
// was lost, or for cartridges written elsewhere).

type labelledView struct {
	Library string
	Volume  api.MediaVolume
}

// mediaLabel labels a cartridge of the library into a pool, erasing it.
func mediaLabel(p Page) {
	f, library := p.Form(), p.Value("library")
	body := api.MediaLabelRequest{Barcode: strings.ToUpper(strings.TrimSpace(f.Get("barcode"))), Pool: strings.TrimSpace(f.Get("pool")),
		Foreign: f.Get("foreign") == "1"}
	if body.Barcode == "" || body.Pool == "" {
		refuse(p, "name the cartridge (its barcode) and the media pool to label it into")
		return
	}
	var v api.MediaVolume
	if err := p.Call("media-label", map[string]string{"library": library}, nil, body, &v); err != nil {
		p.Fail(err)
		return
	}
	p.Fragment("media/labelled", labelledView{Library: library, Volume: v})
}

type cataloguedView struct {
	Library string
	api.MediaCatalogResult
}

// mediaCatalog rebuilds the media catalogue from the library's volumes.
func mediaCatalog(p Page) {
	library := p.Value("library")
	body := api.MediaCatalogRequest{Scan: p.Form().Get("scan") == "1"}
	var res api.MediaCatalogResult
	if err := p.Call("rebuild-media-catalog", map[string]string{"library": library}, nil, body, &res); err != nil {
		p.Fail(err)
		return
	}
	p.Fragment("media/catalogued", cataloguedView{Library: library, MediaCatalogResult: res})
}
