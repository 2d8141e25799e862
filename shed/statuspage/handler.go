package statuspage

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
)

var (
	//go:embed page.html
	pageHTML string
	//go:embed page.css
	pageCSS string
	//go:embed page.js
	pageJS string
)

// pageTemplate is the parsed page and the Content-Security-Policy that
// lets its inline style and script run, and nothing else.
type pageTemplate struct {
	t   *template.Template
	csp string
}

func newPageTemplate() (pageTemplate, error) {
	t, err := template.New("page").Funcs(template.FuncMap{
		"rate": func(v *float64) string { return fmtFloat(v, 1, 1, "") },
		"ms":   func(v *float64) string { return fmtFloat(v, 1000, 1, " ms") },
		"msOf": func(v float64) string { return fmtFloat(&v, 1000, 1, " ms") },
		"pct":  func(v float64) string { return strconv.FormatFloat(v*100, 'f', 0, 64) + "%" },
		"mode": func(degraded bool) string {
			if degraded {
				return "degraded"
			}
			return "healthy"
		},
		"secs": fmtSeconds,
	}).Parse(pageHTML)
	if err != nil {
		return pageTemplate{}, fmt.Errorf("statuspage: %w", err)
	}
	hash := func(s string) string {
		h := sha256.Sum256([]byte(s))
		return "'sha256-" + base64.StdEncoding.EncodeToString(h[:]) + "'"
	}
	csp := "default-src 'none'; script-src " + hash(pageJS) + "; style-src " + hash(pageCSS) +
		"; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	return pageTemplate{t: t, csp: csp}, nil
}

// fmtFloat formats *v times scale with digits decimals and unit, or an en
// dash for an unknown value, as the page's script does.
func fmtFloat(v *float64, scale float64, digits int, unit string) string {
	if v == nil {
		return "\u2013"
	}
	return strconv.FormatFloat(*v*scale, 'f', digits, 64) + unit
}

// fmtSeconds formats a duration of s seconds as the page's script does:
// whole seconds up to two minutes, tenths of minutes beyond.
func fmtSeconds(s float64) string {
	if s < 120 {
		return strconv.FormatFloat(s, 'f', 0, 64) + " s"
	}
	return strconv.FormatFloat(s/60, 'f', 1, 64) + " min"
}

// pageData is what the template reads.
type pageData struct {
	Report        Report
	History       int
	Width, Height int
	Style         template.CSS // the package's own constants, not input
	Script        template.JS
}

// ServeHTTP serves the page for a path that is empty or ends in "/", and
// the JSON report for one that ends in "/json" (with ?history=0, without
// the rules' raw History, which the page's script does not need), to GET
// and HEAD. Other paths get 404, other methods 405. Each request served
// reads the Controller's Stats once and records a sample if one is due
// (see SampleAt).
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	for _, name := range []string{"pardon", "reset"} {
		if path == name || strings.HasSuffix(path, "/"+name) {
			p.action(w, r, name)
			return
		}
	}
	report := path == "json" || strings.HasSuffix(path, "/json")
	if !report && path != "" && !strings.HasSuffix(path, "/") {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "statuspage: read-only", http.StatusMethodNotAllowed)
		return
	}
	rep := p.Report()
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	var body bytes.Buffer
	if report {
		if r.URL.Query().Get("history") == "0" {
			for i := range rep.Rules {
				rep.Rules[i].History = nil
			}
		}
		if err := json.NewEncoder(&body).Encode(rep); err != nil {
			http.Error(w, "statuspage: the report could not be encoded", http.StatusInternalServerError)
			return
		}
		h.Set("Content-Type", "application/json")
	} else {
		err := p.tmpl.t.Execute(&body, pageData{
			Report: rep, History: len(p.hist.buf),
			Width: ChartWidth, Height: ChartHeight,
			Style: template.CSS(pageCSS), Script: template.JS(pageJS),
		})
		if err != nil {
			http.Error(w, "statuspage: the page could not be rendered", http.StatusInternalServerError)
			return
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", p.tmpl.csp)
		h.Set("X-Frame-Options", "DENY")
	}
	h.Set("Content-Length", strconv.Itoa(body.Len()))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body.Bytes())
	}
}
