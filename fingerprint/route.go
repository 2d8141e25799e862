package fingerprint

import "net/http"

// MethodClass groups HTTP methods by their effect, so that limits can treat
// reads and writes apart.
type MethodClass uint8

const (
	// MethodRead is GET, HEAD and OPTIONS, in any case.
	MethodRead MethodClass = iota + 1
	// MethodWrite is every other method: POST, PUT, PATCH, DELETE, and
	// CONNECT, TRACE and extension methods too, since a method a limit does
	// not know must not escape the limits of writes.
	MethodWrite
)

// String returns "read" or "write".
func (c MethodClass) String() string {
	if c == MethodRead {
		return "read"
	}
	return "write"
}

// ClassOf returns the class of an HTTP method, compared without regard to
// case (a client that sends "get" or "Post" is classed as GET or POST);
// "" (which net/http reads as GET) is a read. It allocates nothing.
func ClassOf(method string) MethodClass {
	if method == "" || EqualMethod(method, http.MethodGet) || EqualMethod(method, http.MethodHead) ||
		EqualMethod(method, http.MethodOptions) {
		return MethodRead
	}
	return MethodWrite
}

// EqualMethod reports whether two method names are equal without regard to
// ASCII case, with HEAD equal to GET (a HEAD is a GET without its body, so
// it is routed and limited as one). It allocates nothing.
func EqualMethod(a, b string) bool {
	return foldMethod(a) == foldMethod(b) || len(a) == len(b) && asciiEqualFold(a, b)
}

// foldMethod returns GET for any spelling of HEAD or GET, and m otherwise.
func foldMethod(m string) string {
	if len(m) == 4 && asciiEqualFold(m, http.MethodHead) || len(m) == 3 && asciiEqualFold(m, http.MethodGet) {
		return http.MethodGet
	}
	return m
}

func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x >= 'a' && x <= 'z' {
			x -= 'a' - 'A'
		}
		if y >= 'a' && y <= 'z' {
			y -= 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// AppendRoute appends the route key of req: the ServeMux pattern that
// matched it (req.Pattern) when there is one, otherwise its escaped path
// normalised by AppendNormalizedPath. It allocates nothing when dst has
// room and the path needs no re-escaping.
func AppendRoute(dst []byte, req *http.Request) []byte {
	if req.Pattern != "" {
		return append(dst, req.Pattern...)
	}
	if req.URL == nil {
		return append(dst, '/')
	}
	return AppendNormalizedPath(dst, req.URL.EscapedPath())
}

// NormalizePath returns AppendNormalizedPath(nil, path) as a string.
func NormalizePath(path string) string {
	return string(AppendNormalizedPath(make([]byte, 0, len(path)+1), path))
}

// AppendNormalizedPath appends the normal form of an escaped URL path to
// dst, so that spellings of one route share one key: the query and fragment
// are dropped, percent-encoding is decoded exactly once (a malformed escape
// is kept as it is), ASCII letters are folded to lower case, empty and "."
// segments are removed, ".." removes the segment before it (never climbing
// above the root), and the result starts with '/' and has no trailing slash
// (except the root itself). /login/, /LOGIN, /login?x=1, //login,
// /%6cogin and /./login all become /login.
//
// Decoding once means %2F becomes a separator and %2525 becomes %25, which
// stays as it is: a path is never decoded twice. The result is at most
// len(path)+1 bytes long; it allocates only when dst lacks room.
func AppendNormalizedPath(dst []byte, path string) []byte {
	for i := 0; i < len(path); i++ {
		if path[i] == '?' || path[i] == '#' {
			path = path[:i]
			break
		}
	}
	base := len(dst)
	// Pass 1: '/', then the path decoded once and folded.
	dst = append(dst, '/')
	for i := 0; i < len(path); i++ {
		c := path[i]
		if c == '%' && i+2 < len(path) && isHex(path[i+1]) && isHex(path[i+2]) {
			c = unhex(path[i+1])<<4 | unhex(path[i+2])
			i += 2
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	// Pass 2: resolve segments in place. The read index r never falls
	// behind the write index w, because every segment read is preceded by
	// at least one '/' and is written back with exactly one.
	buf := dst[base:]
	w := 0
	for r := 0; r < len(buf); {
		for r < len(buf) && buf[r] == '/' {
			r++
		}
		start := r
		for r < len(buf) && buf[r] != '/' {
			r++
		}
		seg := buf[start:r]
		switch {
		case len(seg) == 0, len(seg) == 1 && seg[0] == '.':
		case len(seg) == 2 && seg[0] == '.' && seg[1] == '.':
			for w > 0 && buf[w-1] != '/' {
				w--
			}
			if w > 0 {
				w-- // the '/' that opened the removed segment
			}
		default:
			buf[w] = '/'
			w++
			w += copy(buf[w:], seg)
		}
	}
	if w == 0 {
		buf[0] = '/'
		w = 1
	}
	return dst[:base+w]
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
