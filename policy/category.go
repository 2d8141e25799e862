package policy

import (
	"fmt"
	"net/http"
	"strings"
	"unsafe"

	"github.com/sluicehq/sluice/fingerprint"
)

// category is a compiled CategorySpec.
type category struct {
	name    string
	routes  []route
	classes uint8 // bit per fingerprint.MethodClass; 0 means every class
}

// route is one compiled route pattern.
type route struct {
	method string // "" for any
	// path is normalised (fingerprint.AppendNormalizedPath); a prefix
	// keeps the "/" it ends in, and then also matches its root without it.
	path   string
	prefix bool // path ended in "*": a prefix
}

// match reports whether a request of method for the normalised path
// matches r: methods compare without regard to case, HEAD as GET.
func (r route) match(method, path string) bool {
	if r.method != "" && !fingerprint.EqualMethod(r.method, method) {
		return false
	}
	if !r.prefix {
		return path == r.path
	}
	if strings.HasPrefix(path, r.path) {
		return true
	}
	// "/api/*" covers "/api" too, the spelling normalisation gives "/api/".
	return strings.HasSuffix(r.path, "/") && len(path)+1 == len(r.path) && r.path[:len(path)] == path
}

var classes = map[string]fingerprint.MethodClass{"read": fingerprint.MethodRead,
	"write": fingerprint.MethodWrite}

func (v *validator) categories(specs []CategorySpec) []category {
	out := make([]category, len(specs))
	seen := map[string]bool{}
	for i, s := range specs {
		path := fmt.Sprintf("categories[%d]", i)
		c := category{name: s.Name}
		switch {
		case s.Name == "":
			v.failf(path+".name", "is required")
		case seen[s.Name]:
			v.failf(path+".name", "category %q is declared twice", s.Name)
		case isClass(s.Name):
			v.failf(path+".name", "%q is a method class; name the category otherwise", s.Name)
		}
		seen[s.Name] = true
		if len(s.Routes) > MaxRoutes {
			v.failf(path+".routes", "at most %d routes, got %d", MaxRoutes, len(s.Routes))
		}
		for j, p := range s.Routes {
			r, err := parseRoute(p)
			if err != nil {
				v.failf(fmt.Sprintf("%s.routes[%d]", path, j), "%v", err)
			}
			c.routes = append(c.routes, r)
		}
		for j, m := range s.Methods {
			cl, ok := classes[m]
			if !ok {
				v.failf(fmt.Sprintf("%s.methods[%d]", path, j), "must be read or write (every method but GET, HEAD and OPTIONS is a write), got %q", m)
			}
			c.classes |= 1 << cl
		}
		out[i] = c
	}
	return out
}

// parseRoute parses "[METHOD ]/path[*]". The path is normalised as
// request paths are, so that "/Login/" and "/login" name one route.
func parseRoute(s string) (route, error) {
	var r route
	if m, p, ok := strings.Cut(s, " "); ok {
		if m == "" || strings.ToUpper(m) != m {
			return r, fmt.Errorf("method of %q must be upper case", s)
		}
		r.method, s = m, strings.TrimLeft(p, " ")
	}
	if !strings.HasPrefix(s, "/") {
		return r, fmt.Errorf("route %q must start with /", s)
	}
	p, prefix := strings.CutSuffix(s, "*")
	if strings.Contains(p, "*") {
		return r, fmt.Errorf("route %q may have * only at its end", s)
	}
	r.path, r.prefix = fingerprint.NormalizePath(p), prefix
	if prefix && strings.HasSuffix(p, "/") && r.path != "/" {
		r.path += "/"
	}
	return r, nil
}

// Category returns the endpoint category of a request with method and
// route (the pattern the router matched, such as http.Request.Pattern, or
// the request's escaped path): the first declared category that matches,
// else the method class ("read", "write"). The route's path is normalised
// first (fingerprint.AppendNormalizedPath: case, slashes, dot segments,
// escapes), so /login, /Login/, //login and /%6cogin are one route;
// methods compare without regard to case, and HEAD matches what GET
// matches. It allocates nothing for routes up to 256 bytes.
func (p *Policy) Category(method, route string) string {
	if m, path, ok := strings.Cut(route, " "); ok && m != "" && path != "" && path[0] == '/' {
		route = path // a ServeMux pattern with its method
	}
	var buf [256]byte
	norm := fingerprint.AppendNormalizedPath(buf[:0], route)
	path := unsafe.String(unsafe.SliceData(norm), len(norm)) // read only below, while buf lives
	class := fingerprint.ClassOf(method)
	for i := range p.cats {
		c := &p.cats[i]
		if c.classes != 0 && c.classes&(1<<class) == 0 {
			continue
		}
		if len(c.routes) == 0 {
			return c.name
		}
		for _, r := range c.routes {
			if r.match(method, path) {
				return c.name
			}
		}
	}
	return class.String()
}

// CategoryFunc returns the categorizer for shed.WithCategory: Category of
// the request's method and route. The route is r.Pattern (http.ServeMux's
// match) when it names one route; when no pattern matched (the middleware
// wraps the mux), or the pattern is a subtree ("/api/", "/files/{p...}":
// the middleware is mounted on it), it is the request's path, so that
// path routes under a subtree match.
func (p *Policy) CategoryFunc() func(*http.Request) string {
	return func(r *http.Request) string {
		route := r.Pattern
		if route == "" || strings.HasSuffix(route, "/") || strings.HasSuffix(route, "...}") {
			route = r.URL.EscapedPath()
		}
		return p.Category(r.Method, route)
	}
}

func isClass(name string) bool { _, ok := classes[name]; return ok }
