package shed

import (
	"net/http/httptest"
	"testing"
)

// TestDefaultCategoryIsTheMethodClassInAnyCase: HEAD shares GET's
// category, methods compare without regard to case, and a method that is
// not GET, HEAD or OPTIONS counts as a write, so no spelling and no
// extension method escapes the limits of writes.
func TestDefaultCategoryIsTheMethodClassInAnyCase(t *testing.T) {
	for _, tc := range []struct{ method, want string }{
		{"GET", "read"}, {"get", "read"}, {"HEAD", "read"}, {"head", "read"}, {"Options", "read"},
		{"POST", "write"}, {"post", "write"}, {"PUT", "write"}, {"PATCH", "write"}, {"delete", "write"},
		{"PROPFIND", "write"}, {"BREW", "write"}, {"CONNECT", "write"}, {"TRACE", "write"}, {"GETS", "write"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Method = tc.method
		if got := methodCategory(r); got != tc.want {
			t.Errorf("method %q: category %q, want %q", tc.method, got, tc.want)
		}
	}
}
