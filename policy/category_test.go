package policy_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/policy"
)

// TestCategoryRouteSpellingsShareOneCategory: every spelling of a route a
// client can send (case, trailing or doubled slashes, dot segments,
// escapes) falls in the route's category, and so do HEAD for a GET route
// and a method in any case; methods nobody named are writes.
func TestCategoryRouteSpellingsShareOneCategory(t *testing.T) {
	p, err := policy.Parse("t.json", []byte(`{"version": 1,
 "categories": [
   {"name": "auth", "routes": ["POST /Login/"]},
   {"name": "page", "routes": ["GET /home"]},
   {"name": "api", "routes": ["/api/*"]},
   {"name": "writes", "methods": ["write"]}
 ],
 "rules": [{"name": "r", "identity": "ip", "algorithm": "sliding_log", "limit": 5, "window": "1m"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ method, route, want string }{
		{"POST", "/login", "auth"},
		{"POST", "/login/", "auth"},
		{"POST", "/Login", "auth"},
		{"POST", "//login", "auth"},
		{"POST", "/./login", "auth"},
		{"POST", "/%6cogin", "auth"},
		{"POST", "/a/../login", "auth"},
		{"post", "/login", "auth"},
		{"Post", "/LOGIN", "auth"},
		{"POST", "POST /login", "auth"},
		{"GET", "/login", "read"},
		{"GET", "/home", "page"},
		{"HEAD", "/home", "page"},
		{"head", "/HOME/", "page"},
		{"get", "/home", "page"},
		{"OPTIONS", "/home", "read"},
		{"GET", "/api", "api"},
		{"GET", "/api/", "api"},
		{"GET", "/API/users/7", "api"},
		{"GET", "/apix", "read"},
		{"PROPFIND", "/x", "writes"},
		{"brew", "/x", "writes"},
		{"CONNECT", "/x", "writes"},
		{"TRACE", "/x", "writes"},
	} {
		if got := p.Category(tc.method, tc.route); got != tc.want {
			t.Errorf("Category(%q, %q) = %q, want %q", tc.method, tc.route, got, tc.want)
		}
	}
}

// TestCategoryFuncUnderASubtree: a middleware mounted on a subtree
// pattern ("/api/") categorises by the request's path, so the path routes
// under the subtree match; an exact pattern is used as it is.
func TestCategoryFuncUnderASubtree(t *testing.T) {
	p, err := policy.Parse("t.json", []byte(`{"version": 1,
 "categories": [
   {"name": "auth", "routes": ["POST /api/login"]},
   {"name": "items", "routes": ["/items/{id}"]}
 ],
 "rules": [{"name": "r", "identity": "ip", "algorithm": "sliding_log", "limit": 5, "window": "1m"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	cat := p.CategoryFunc()
	var got string
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = cat(r) })
	mux := http.NewServeMux()
	mux.Handle("/api/", record)
	mux.Handle("/items/{id}", record)
	mux.Handle("/files/{p...}", record)
	for _, tc := range []struct{ method, target, want string }{
		{"POST", "/api/login", "auth"},
		{"POST", "/api/Login/", "auth"},
		{"GET", "/api/login", "read"},
		{"POST", "/api/other", "write"},
		{"GET", "/items/7", "items"},
		{"GET", "/files/a/b", "read"},
	} {
		got = ""
		mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tc.method, tc.target, nil))
		if got != tc.want {
			t.Errorf("%s %s under the mux: %q, want %q", tc.method, tc.target, got, tc.want)
		}
	}
	// Outside any mux (the middleware wraps the router): the path.
	if got := cat(httptest.NewRequest("POST", "/API/LOGIN", nil)); got != "auth" {
		t.Errorf("no pattern: %q, want auth", got)
	}
}

// TestCategoryMethodOtherIsGone: "other" is no method class any more.
func TestCategoryMethodOtherIsGone(t *testing.T) {
	_, err := policy.Parse("t.json", []byte(`{"version": 1,
 "categories": [{"name": "odd", "methods": ["other"]}],
 "rules": [{"name": "r", "identity": "ip", "algorithm": "sliding_log", "limit": 5, "window": "1m"}]}`))
	if err == nil {
		t.Fatal(`methods ["other"] parsed`)
	}
}
