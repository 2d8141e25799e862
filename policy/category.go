package policy

import (
	"fmt"
	"net/http"
	"strings"

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
	path   string
	prefix bool // path ends in "*": a prefix
}

func (r route) match(method, path string) bool {
	if r.method != "" && r.method != method {
		return false
	}
	if r.prefix {
		return strings.HasPrefix(path, r.path)
	}
	return path == r.path
}

var classes = map[string]fingerprint.MethodClass{"read": fingerprint.MethodRead,
	"write": fingerprint.MethodWrite, "other": fingerprint.MethodOther}

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
				v.failf(fmt.Sprintf("%s.methods[%d]", path, j), "must be read, write or other, got %q", m)
			}
			c.classes |= 1 << cl
		}
		out[i] = c
	}
	return out
}

// parseRoute parses "[METHOD ]/path[*]".
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
	if p, ok := strings.CutSuffix(s, "*"); ok {
		r.path, r.prefix = p, true
	} else {
		r.path = s
	}
	if strings.Contains(r.path, "*") {
		return r, fmt.Errorf("route %q may have * only at its end", s)
	}
	return r, nil
}

// Category returns the endpoint category of a request with method and
// route (the pattern the router matched, such as http.Request.Pattern, or
// the normalised path): the first declared category that matches, else
// the method class ("read", "write", "other"). It allocates nothing.
func (p *Policy) Category(method, route string) string {
	if m, path, ok := strings.Cut(route, " "); ok && m != "" && path != "" && path[0] == '/' {
		route = path // a ServeMux pattern with its method
	}
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
			if r.match(method, route) {
				return c.name
			}
		}
	}
	return class.String()
}

// CategoryFunc returns the categorizer for shed.WithCategory: Category of
// the request's method and r.Pattern (http.ServeMux's match), or its
// URL path when no pattern matched.
func (p *Policy) CategoryFunc() func(*http.Request) string {
	return func(r *http.Request) string {
		route := r.Pattern
		if route == "" {
			route = r.URL.Path
		}
		return p.Category(r.Method, route)
	}
}

func isClass(name string) bool { _, ok := classes[name]; return ok }
