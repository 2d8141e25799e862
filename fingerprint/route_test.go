package fingerprint

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestNormalizePathSharesOneKey(t *testing.T) {
	for _, p := range []string{"/login", "/login/", "/LOGIN", "/login?x=1", "//login", "/%6cogin",
		"/./login", "/%4C%4f%47%49%4E", "login", "/a/../login", "/../login", "/login#frag", "/login//"} {
		if got := NormalizePath(p); got != "/login" {
			t.Errorf("NormalizePath(%q) = %q", p, got)
		}
	}
}

func TestNormalizePathCases(t *testing.T) {
	cases := map[string]string{
		"":                 "/",
		"/":                "/",
		"//":               "/",
		"?q":               "/",
		"/..":              "/",
		"/a/b/../../..":    "/",
		"/a/./b/./c/":      "/a/b/c",
		"/a%2Fb":           "/a/b",
		"/%2e%2e/admin":    "/admin",
		"/%2525":           "/%25", // decoded once only
		"/%zz/%4":          "/%zz/%4",
		"/a%3Fb?c":         "/a?b",
		"/Users/42/Orders": "/users/42/orders",
		"/...":             "/...",
		"/a/..b":           "/a/..b",
	}
	for in, want := range cases {
		if got := NormalizePath(in); got != want {
			t.Errorf("NormalizePath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAppendRoute(t *testing.T) {
	mux := http.NewServeMux()
	var got string
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
		got = string(AppendRoute(nil, r))
	})
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/items/7", nil))
	if got != "GET /items/{id}" {
		t.Errorf("pattern route %q", got)
	}
	r := httptest.NewRequest("GET", "/%256cogin/?x=1", nil)
	if got := string(AppendRoute([]byte("k:"), r)); got != "k:/%6cogin" {
		t.Errorf("path route %q (must decode once)", got)
	}
	r = httptest.NewRequest("GET", "/LOGIN/", nil)
	if got := string(AppendRoute(nil, r)); got != "/login" {
		t.Errorf("path route %q", got)
	}
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf = AppendRoute(buf[:0], r) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

func TestClassOf(t *testing.T) {
	cases := map[string]MethodClass{
		"GET": MethodRead, "HEAD": MethodRead, "OPTIONS": MethodRead, "": MethodRead,
		"get": MethodRead, "Head": MethodRead, "options": MethodRead,
		"POST": MethodWrite, "PUT": MethodWrite, "PATCH": MethodWrite, "DELETE": MethodWrite,
		"post": MethodWrite, "Delete": MethodWrite,
		"CONNECT": MethodWrite, "TRACE": MethodWrite, "PROPFIND": MethodWrite, "BREW": MethodWrite,
		"GETX": MethodWrite, "GE": MethodWrite, "HEADS": MethodWrite, "OPTION": MethodWrite,
	}
	for m, want := range cases {
		if got := ClassOf(m); got != want {
			t.Errorf("ClassOf(%q) = %v, want %v", m, got, want)
		}
	}
	if MethodRead.String() != "read" || MethodWrite.String() != "write" {
		t.Error("names")
	}
	if n := testing.AllocsPerRun(100, func() { ClassOf("propfind") }); n != 0 {
		t.Errorf("ClassOf allocates %v times", n)
	}
}

func TestEqualMethod(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"GET", "GET", true}, {"get", "GET", true}, {"HEAD", "GET", true}, {"head", "get", true},
		{"GET", "HEAD", true}, {"POST", "post", true}, {"PoSt", "POST", true},
		{"POST", "PUT", false}, {"HEAD", "POST", false}, {"GET", "GETS", false}, {"", "GET", false},
		{"PROPFIND", "propfind", true}, {"OPTIONS", "GET", false},
	} {
		if got := EqualMethod(tc.a, tc.b); got != tc.want {
			t.Errorf("EqualMethod(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func FuzzNormalizePath(f *testing.F) {
	for _, s := range []string{"/login/", "//a/./b/../c?x", "/%6cogin", "%", "/%2", "/..%2f..", "#?", "/A/%2E%2E/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		buf := make([]byte, 0, len(p)+1)
		var out []byte
		if n := testing.AllocsPerRun(1, func() { out = AppendNormalizedPath(buf[:0], p) }); n != 0 {
			t.Fatalf("%v allocations", n)
		}
		s := string(out)
		if len(s) > len(p)+1 || s == "" || s[0] != '/' {
			t.Fatalf("%q -> %q", p, s)
		}
		if s != "/" && strings.HasSuffix(s, "/") || strings.Contains(s, "//") {
			t.Fatalf("%q -> %q: empty segment", p, s)
		}
		for _, seg := range strings.Split(s[1:], "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("%q -> %q: dot segment", p, s)
			}
		}
		if strings.ContainsAny(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			t.Fatalf("%q -> %q: upper case", p, s)
		}
		// Without escapes (and without a decoded ? or #, which a second pass
		// would read as a query) the normal form is a fixed point.
		if !strings.ContainsAny(s, "%?#") && NormalizePath(s) != s {
			t.Fatalf("%q -> %q -> %q", p, s, NormalizePath(s))
		}
	})
}
